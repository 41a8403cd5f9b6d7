// LLaMA in the performance model: its layer's kernels, parameters, activation memory, the
// untied output layer and the refusal of ZeRO-3's GPT-only replay.
#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/accounting/flops.h"
#include "core/sim/cost_model.h"
#include "core/sim/memory_model.h"
#include "core/sim/simulator.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

RunConfig llama_run(const std::string& preset, int tp, int pp, int dp, int b, int B, int vpp = 1) {
  RunConfig c;
  c.experiment = "simulate";
  c.model = preset_config(preset);
  c.par.tp = tp, c.par.pp = pp, c.par.dp = dp, c.par.vpp = vpp;
  c.par.micro_batch = b, c.par.global_batch = B;
  c.par.schedule = vpp > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
  c.par.recompute = Recompute::Full;
  c.par.scatter_gather = true;
  c.backend = BackendKind::Cuda;
  c.precision = Precision::Bf16;
  validate_run(c);
  return c;
}

TEST(SimLlama, OneDeviceHoldsExactlyTheModelsParameters) {
  const RunConfig c = llama_run("llama-7b", 1, 1, 1, 1, 1);
  const MemoryVerdict v = memory_verdict(c, selene());
  // 32000 is a multiple of 128: no padding. Embedding and untied output layer both on stage 0.
  EXPECT_DOUBLE_EQ(v.stages[0].params, double(params_exact(c.model)));
  // bf16 accumulates and reduces gradients in fp32 (--accumulate-allreduce-grads-in-fp32): 18.
  EXPECT_DOUBLE_EQ(v.stages[0].state, 18.0 * params_exact(c.model));
}

TEST(SimLlama, TheLastStageHoldsTheUntiedOutputLayerAndTheFirstNoPositionTable) {
  const RunConfig c = llama_run("llama-7b", 8, 4, 1, 1, 8);
  const MemoryVerdict v = memory_verdict(c, selene());
  // Megatron pads V = 32000 to a multiple of 128 t = 1024: 32768.
  const double h = 4096, f = 11008, per_layer = (4 * h * h + 3 * h * f) / 8 + 2 * h, vt = 32768.0 / 8 * h;
  EXPECT_DOUBLE_EQ(v.stages[0].params, 8 * per_layer + vt);
  EXPECT_DOUBLE_EQ(v.stages[1].params, 8 * per_layer);
  EXPECT_DOUBLE_EQ(v.stages[3].params, 8 * per_layer + vt + h);
}

TEST(SimLlama, ActivationsFollowKorthikantiWithoutDropoutAndWithSwiGlu) {
  const RunConfig c = llama_run("llama-65b", 8, 1, 1, 1, 1);
  const double s = 2048, h = 8192, a = 64, f = c.model.ffn_hidden(), t = 8, sbh = s * h;
  EXPECT_EQ(f, 22016);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Full), 2 * sbh);
  const double dense = sbh * (8 + (8 + 6 * f / h) / t);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Selective), dense);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::None), dense + 2 * a * s * s / t);
}

TEST(SimLlama, ModulesHoldTheFusedGateUpAndNoBiases) {
  const RunConfig c = llama_run("llama-13b", 4, 1, 1, 1, 1);
  const CostModel cm(c, selene());
  const double h = 5120, f = c.model.ffn_hidden(), t = 4;
  EXPECT_EQ(f, 13824);
  EXPECT_DOUBLE_EQ(cm.modules[kModuleQkv].weights, 3 * h * h / t);
  EXPECT_DOUBLE_EQ(cm.modules[kModuleFc].weights, 2 * f * h / t);
  EXPECT_DOUBLE_EQ(cm.modules[kModuleFc2].weights, f * h / t);
  EXPECT_DOUBLE_EQ(cm.modules[kModuleFc].biases + cm.modules[kModuleFc2].biases, 0.0);
  EXPECT_DOUBLE_EQ(cm.params_per_layer, (4 * h * h + 3 * h * f) / t + 2 * h);
  EXPECT_DOUBLE_EQ(cm.params_position, 0.0);
}

// Grouped-query attention (llama2-70b: 64 heads, 8 groups, f = 28672): the QKV GEMM has
// (a + 2g) h/a = 10240 columns, t = 8 holds one group per device; parameters and the model's
// FLOPs follow.
TEST(SimGqa, QkvGemmAndParametersUseTheGroups) {
  const RunConfig c = llama_run("llama2-70b", 8, 1, 1, 1, 1);
  const CostModel cm(c, selene());
  const double h = 8192, f = 28672, t = 8, qkv = 10240;
  EXPECT_DOUBLE_EQ(cm.modules[kModuleQkv].weights, qkv * h / t);
  EXPECT_DOUBLE_EQ(cm.modules[kModuleFc].weights, 2 * f * h / t);
  EXPECT_DOUBLE_EQ(cm.params_per_layer, (qkv * h + h * h + 3 * h * f) / t + 2 * h);
  RunConfig one = llama_run("llama2-70b", 1, 1, 1, 1, 1);
  const MemoryVerdict v = memory_verdict(one, selene());
  EXPECT_DOUBLE_EQ(v.stages[0].params, double(params_exact(one.model)));  // 32000: no padding
  // The same model with a key and value per head: more QKV GEMM time, the rest unchanged.
  RunConfig mha = c;
  mha.model.query_groups = 0;
  const CostModel cmm(mha, selene());
  EXPECT_DOUBLE_EQ(cmm.modules[kModuleQkv].weights, 3 * h * h / t);
  EXPECT_LT(cm.layer.forward.gemm, cmm.layer.forward.gemm);
  EXPECT_LT(cm.layer.backward.gemm, cmm.layer.backward.gemm);
}

// Activations: with flash attention (megatron-2022, mcore) the core keeps q and the groups' k and
// v, (1 + 2g/a) sbh/t; Megatron's unfused core attention expands k and v to every head
// (repeat_interleave) and keeps the copies: 3 sbh/t as without groups.
TEST(SimGqa, KeptKeysAndValuesFollowTheAttentionKernel) {
  RunConfig c = llama_run("llama2-70b", 8, 1, 1, 1, 1);
  const double s = 4096, h = 8192, f = 28672, t = 8, sbh = s * h, E = 2;
  const double g = 8, a = 64;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Selective),
                   sbh * (4 * E + ((3 + 1) * E + 3 * E * f / h) / t));
  c.stack = StackKind::Mcore;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Selective),
                   sbh * (4 * E + ((1 + 2 * g / a + 1) * E + 3 * E * f / h) / t));
  RunConfig mha = c;
  mha.model.query_groups = 0;
  EXPECT_LT(layer_activation_bytes(c, Recompute::Selective), layer_activation_bytes(mha, Recompute::Selective));
}

TEST(SimGqa, SimulatesLlama2And3) {
  for (const char* name : {"llama2-70b", "llama3-70b"}) {
    RunConfig c = llama_run(name, 8, 4, 4, 1, 128);
    const SimResult r = simulate(c, selene());
    EXPECT_GT(r.tflops_per_gpu, 100.0) << name;
    EXPECT_LT(r.tflops_per_gpu, 312.0) << name;
  }
  // t = 16 would split llama3-8b's 8 groups over two devices each: refused.
  RunConfig bad = llama_run("llama3-8b", 8, 1, 1, 1, 1);
  bad.par.tp = 16;
  try {
    validate_run(bad);
    FAIL() << "--tp 16 with 8 query groups must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--tp 16 must divide --num-query-groups 8"), std::string::npos) << e.what();
  }
}

TEST(SimLlama, NoTiedEmbeddingAllReduceAcrossStages) {
  RunConfig c = llama_run("llama-7b", 8, 4, 1, 1, 8);
  EXPECT_EQ(CostModel(c, selene()).embedding_allreduce(), 0.0);
  c.model.arch = Arch::Gpt;
  EXPECT_GT(CostModel(c, selene()).embedding_allreduce(), 0.0);
}

TEST(SimLlama, FewerMemoryBoundKernelsThanGptOfTheSameWidth) {
  // Same h and a: llama drops dropout and bias kernels but adds rotary and a wider SwiGLU.
  RunConfig c = llama_run("llama-7b", 8, 1, 1, 1, 1);
  const CostModel l(c, selene());
  c.model.arch = Arch::Gpt;
  const CostModel g(c, selene());
  EXPECT_LT(l.layer.forward.membound + l.layer.backward.membound, g.layer.forward.membound + g.layer.backward.membound);
  // The MLP's GEMMs: 3hf = 1.008 x 8h^2 FLOPs; the layer's GEMM time within a few percent.
  EXPECT_NEAR(l.layer.forward.gemm / g.layer.forward.gemm, 1.0, 0.05);
}

TEST(SimLlama, SimulatesAndRefusesZero3ByName) {
  RunConfig c = llama_run("llama-65b", 8, 8, 32, 1, 2048);
  const SimResult r = simulate(c, selene());
  EXPECT_GT(r.tflops_per_gpu, 100.0);
  EXPECT_LT(r.tflops_per_gpu, 312.0);
  EXPECT_LT(r.model_tflops_per_gpu, r.tflops_per_gpu);  // no recomputation counted
  c.par.tp = 1, c.par.pp = 1, c.par.dp = 2048, c.par.zero = 3;
  try {
    simulate(c, selene());
    FAIL() << "ZeRO-3 with llama must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--zero 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptdp::sim
