// The cost model as a list of kernels (kernels.h): every layer kernel belongs to a module, the
// list's times add up to the passes the simulator replays, and a stack's features change the list.
#include "core/sim/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/sim/cost_model.h"
#include "core/sim/paper_setups.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

// GPT-3 175B on 8 x 12 x 8 A100s, under `stack`, with sequence parallelism where it has it.
RunConfig gpt3_under(StackKind stack, Recompute mode) {
  RunConfig c = paper_run(96, 12288, 96, 8, 12, 8, 1, 1536);
  c.stack = stack;
  c.par.recompute = mode;
  c.par.sequence_parallel = software_stack(stack).sequence_parallel;
  return c;
}

PassCost list_pass(const CostModel& cm, Where where, Phase phase) {
  PassCost p;
  const KernelCosting costs = cm.costing();
  for (const Kernel& k : cm.kernels)
    if (k.where == where && k.phase == phase) p.add(k.kind, kernel_time(k, cm.kernels, costs));
  return p;
}

void expect_same_pass(const PassCost& a, const PassCost& b, const std::string& what) {
  EXPECT_NEAR(a.gemm, b.gemm, 1e-12) << what;
  EXPECT_NEAR(a.attention, b.attention, 1e-12) << what;
  EXPECT_NEAR(a.membound, b.membound, 1e-12) << what;
  EXPECT_NEAR(a.tp_comm, b.tp_comm, 1e-12) << what;
}

bool lists_kernel(const CostModel& cm, const char* name) {
  return std::any_of(cm.kernels.begin(), cm.kernels.end(), [&](const Kernel& k) { return !std::strcmp(k.name, name); });
}

TEST(SimKernels, TheListsTimesAreThePassesTheSimulatorReplays) {
  for (const auto& [stack, name] : EnumNames<StackKind>::values)
    for (Recompute mode : {Recompute::Full, Recompute::Selective}) {
      if (mode == Recompute::Selective && !software_stack(stack).selective_recompute) continue;
      const CostModel cm(gpt3_under(stack, mode), selene());
      const std::string what = std::string(name) + " " + std::string(enum_name(mode));
      for (Where where : {Where::Layer, Where::Embedding, Where::Head})
        for (Phase phase : {Phase::Forward, Phase::Recompute, Phase::Backward})
          expect_same_pass(list_pass(cm, where, phase), cm.pass_cost(where, phase), what);
      for (const Kernel& k : cm.kernels) {
        if (k.where == Where::Layer) {
          EXPECT_TRUE(k.module >= 0 && k.module < kLayerModules) << what << " " << k.name;
        }
      }
    }
}

TEST(SimKernels, AStacksFeaturesChangeItsList) {
  const CostModel paper(gpt3_under(StackKind::Megatron2021, Recompute::Full), selene());
  const CostModel mcore(gpt3_under(StackKind::Mcore, Recompute::Full), selene());
  const CostModel own(gpt3_under(StackKind::Ptdp, Recompute::Full), selene());
  // Megatron's unfused core attention and its dropout; flash attention keeps the scores on chip.
  EXPECT_TRUE(lists_kernel(paper, "scale-mask-softmax") && lists_kernel(paper, "attention dropout"));
  EXPECT_FALSE(lists_kernel(mcore, "scale-mask-softmax") || lists_kernel(mcore, "attention dropout"));
  EXPECT_TRUE(lists_kernel(mcore, "q k^T (flash)"));
  // ptdp: no dropout, the heads permuted around its unfused attention, every kernel in a backend op.
  EXPECT_TRUE(lists_kernel(own, "permute heads in") && lists_kernel(own, "causal softmax"));
  EXPECT_FALSE(lists_kernel(own, "attention dropout") || lists_kernel(own, "bias-dropout-add"));
  for (const Kernel& k : own.kernels) EXPECT_TRUE(k.op || k.kind == KernelKind::TpComm) << k.name;
  // The weight gradients' own accumulation pass: only where the GEMM does not accumulate.
  EXPECT_TRUE(lists_kernel(paper, "weight grads into main_grad"));
  EXPECT_FALSE(lists_kernel(mcore, "weight grads into main_grad") || lists_kernel(own, "weight grads into main_grad"));
}

TEST(SimKernels, ZeroThreeIsRefusedUnderThePtdpStack) {
  RunConfig c = paper_run(24, 2048, 16, 1, 1, 64, 1, 512);
  c.par.zero = 3;
  c.stack = StackKind::Ptdp;
  EXPECT_NE(stack_refusal(c).find("--zero 3: --stack ptdp has no ZeRO-3 model"), std::string::npos) << stack_refusal(c);
}

// ptdp's optimizer step is its own (one adamw_multi pass beside the norm and the zeroing), not
// Megatron's copies and unscaling: 38 bytes a parameter in bf16 with f32 state, 36 in f32, and 24
// more for bf16 moments (each widened to f32 and rounded back).
TEST(SimKernels, PtdpsOptimizerStepIsOnePassBesideTheNormAndTheZeroing) {
  RunConfig c = paper_run(24, 2048, 16, 1, 1, 1, 4, 4);
  c.stack = StackKind::Ptdp;
  c.precision = Precision::Bf16;
  EXPECT_DOUBLE_EQ(CostModel(c, testing::selene()).optimizer_bytes_per_param, 4 + (4 + 2 * 12 + 2) + 4);
  RunConfig megatron = c;
  megatron.stack = StackKind::Megatron2022;
  EXPECT_GT(CostModel(megatron, testing::selene()).optimizer_bytes_per_param, 50);
  c.precision = Precision::F32;
  EXPECT_DOUBLE_EQ(CostModel(c, testing::selene()).optimizer_bytes_per_param, 4 + (4 + 2 * 12) + 4);
  c.precision = Precision::Bf16;
  PrecisionKnobs knobs;
  knobs.exp_avg_bytes = knobs.exp_avg_sq_bytes = 2;
  EXPECT_DOUBLE_EQ(ptdp_optimizer_bytes_per_param(c, knobs, 4, 2), 38 + 2 * (2 * (2 + 4)));
}

}  // namespace
}  // namespace ptdp::sim
