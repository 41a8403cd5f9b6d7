// Context parallelism in the performance model: the ring's transfers and steps against the formula,
// the a2a and allgather variants' collectives, the work per rank, the group's placement, the
// gradient reduction over d c ranks, the activation memory, the stacks that refuse it, and the
// simulated iteration against NVIDIA's published Llama 3.1 405B runs (results/paper/).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/results/csv_reader.h"
#include "core/sim/cost_model.h"
#include "core/sim/kernel_builder.h"
#include "core/sim/memory_model.h"
#include "core/sim/simulator.h"
#include "core/sim/stack.h"
#include "core/sim/testing/mcore_run.h"

namespace ptdp::sim {
namespace {

// Llama 3.1 405B as NVIDIA's DGX Cloud recipe runs it (bf16, mcore, a distributed optimizer).
RunConfig llama405b(int tp, int cp, int pp, int dp, int vpp, int B, int layers = 126) {
  return testing::mcore_run("llama3.1-405b", tp, cp, pp, dp, vpp, B, layers);
}

const HardwareProfile& h100() {
  static const HardwareProfile hw = load_profile("h100-dgx");
  return hw;
}

struct Count {
  int items = 0;
  double bytes = 0;
};
Count count(const KernelList& list, Phase phase, Collective c, const std::string& prefix) {
  Count n;
  for (const Kernel& k : list)
    if (k.where == Where::Layer && k.phase == phase && k.kind == KernelKind::TpComm && k.collective == c &&
        k.group == Group::Context && std::string(k.name).rfind(prefix, 0) == 0) {
      ++n.items;
      n.bytes += k.bytes;
    }
  return n;
}

double attention_flops(const KernelList& list, Phase phase) {
  double f = 0;
  for (const Kernel& k : list)
    if (k.where == Where::Layer && k.phase == phase && k.kind == KernelKind::Attention) f += k.flops();
  return f;
}

// One layer's list under a stack that has every --cp-comm-type (none of --stack's does yet).
KernelList layer_list(RunConfig c, CpComm comm) {
  c.par.cp_comm = comm;
  SoftwareStack stack = software_stack(StackKind::Mcore);
  stack.cp_comm_types = true;
  const ModelTensors tensors = model_tensors(c.model, c.model.padded_vocab(c.par.tp));
  KernelList list;
  layer_kernels(list, layer_shape(c, tensors, 2), stack, c);
  return list;
}

TEST(SimCp, TheRingSendsEachKeyValueBlockCMinusOneStepsForwardAndItsGradientBack) {
  for (int cp : {2, 4, 8}) {
    const RunConfig c = llama405b(8, cp, 1, 1, 1, 1, 2);
    const KernelList list = CostModel(c, h100()).kernels;
    // 2 b (s/c) (g/t) hd elements of bf16: g = 8 groups over t = 8, hd = 128.
    const double block = 2.0 * 1 * (8192.0 / cp) * (8 / 8) * 128 * 2;
    const Count fwd = count(list, Phase::Forward, Collective::SendRecv, "k v block");
    EXPECT_EQ(fwd.items, cp - 1) << cp;
    EXPECT_DOUBLE_EQ(fwd.bytes, (cp - 1) * block) << cp;
    // Backward: one transfer a step, the blocks again (c-1) and their gradients after them (c-1).
    const Count back = count(list, Phase::Backward, Collective::SendRecv, "");
    EXPECT_EQ(back.items, cp) << cp;
    EXPECT_DOUBLE_EQ(back.bytes, 2 * (cp - 1) * block) << cp;
    EXPECT_DOUBLE_EQ(count(list, Phase::Backward, Collective::SendRecv, "dk dv").bytes, block) << "the last step's";
  }
}

TEST(SimCp, EachRankComputesOneCthOfTheCausalAttention) {
  const double whole = attention_flops(CostModel(llama405b(8, 1, 1, 1, 1, 1, 2), h100()).kernels, Phase::Forward);
  for (int cp : {2, 4, 8}) {
    const KernelList ring = CostModel(llama405b(8, cp, 1, 1, 1, 1, 2), h100()).kernels;
    EXPECT_NEAR(attention_flops(ring, Phase::Forward), whole / cp, 1e-9 * whole) << cp;
    for (CpComm comm : {CpComm::A2A, CpComm::AllGather})
      EXPECT_NEAR(attention_flops(layer_list(llama405b(8, cp, 1, 1, 1, 1, 2), comm), Phase::Forward), whole / cp,
                  1e-9 * whole)
          << cp;
  }
}

TEST(SimCp, EveryGemmWorksOnTheRanksTokens) {
  const KernelList one = CostModel(llama405b(8, 1, 1, 1, 1, 1, 2), h100()).kernels;
  const KernelList two = CostModel(llama405b(8, 2, 1, 1, 1, 1, 2), h100()).kernels;
  auto rows = [](const KernelList& l, const char* name) {
    for (const Kernel& k : l)
      if (k.kind == KernelKind::Gemm && std::string(k.name) == name) return k.m;
    return 0.0;
  };
  for (const char* g : {"qkv", "proj", "fc", "fc2"}) EXPECT_DOUBLE_EQ(rows(two, g), rows(one, g) / 2) << g;
}

TEST(SimCp, ARingTransferCostsOnlyWhatItsStepsAttentionDoesNotHide) {
  const CostModel cm(llama405b(8, 4, 1, 1, 1, 1, 2), h100());
  const KernelCosting costs = cm.costing();
  EXPECT_EQ(costs.cp_per_node, 1) << "t = 8 fills a node: the group's ranks are in different nodes";
  for (const Kernel& k : cm.kernels) {
    if (k.group != Group::Context || k.overlap != Overlap::UnderKernels) continue;
    double step = 0;
    for (int i = k.gemm; i < k.gemm + k.span; ++i) step += kernel_time(cm.kernels[size_t(i)], cm.kernels, costs);
    EXPECT_DOUBLE_EQ(kernel_time(k, cm.kernels, costs), std::max(0.0, cm.net.p2p(k.bytes, true) - step)) << k.name;
  }
}

TEST(SimCp, TheGroupStaysInANodeWhenTTimesCFits) {
  EXPECT_EQ(CostModel(llama405b(4, 2, 1, 1, 1, 1, 2), h100()).costing().cp_per_node, 2);
  EXPECT_EQ(CostModel(llama405b(2, 8, 1, 1, 1, 1, 2), h100()).costing().cp_per_node, 4);
  EXPECT_EQ(CostModel(llama405b(8, 2, 1, 1, 1, 1, 2), h100()).costing().cp_per_node, 1);
}

TEST(SimCp, AnAllToAllSendsTheOffNodeShareOverEachRanksNic) {
  const Network net(h100());
  const HardwareProfile& hw = h100();
  const double bytes = 64e6;
  // Inside a node: 7/8 of the buffer over NVLink, plus an all-gather's latency (that of a 1-byte one).
  const double latency = net.allgather(1, 8, 8) - 7.0 / 8 / hw.nvlink_busbw;
  EXPECT_NEAR(net.alltoall(bytes, 8, 8), 7.0 / 8 * bytes / hw.nvlink_busbw + latency, 1e-12);
  const double across = net.alltoall(bytes, 16, 8);
  EXPECT_GT(across, 0.5 * bytes / net.nic_bw_per_device());  // half of each buffer leaves the node
  EXPECT_EQ(net.alltoall(bytes, 1, 1), 0);
}

TEST(SimCp, A2aExchangesQkvAndTheOutputEachWay) {
  const RunConfig c = llama405b(8, 2, 1, 1, 1, 1, 2);
  const KernelList list = layer_list(c, CpComm::A2A);
  const double sl = 8192 / 2, q = 1 * sl * (16384 / 8) * 2, kv = 1 * sl * 128 * 2;  // a/t heads, g/t = 1 group
  int fwd = 0, bwd = 0;
  double fwd_bytes = 0;
  for (const Kernel& k : list) {
    if (k.collective != Collective::AllToAll || k.group != Group::Context) continue;
    (k.phase == Phase::Forward ? fwd : bwd) += 1;
    if (k.phase == Phase::Forward) fwd_bytes += k.bytes;
  }
  EXPECT_EQ(fwd, 4);
  EXPECT_EQ(bwd, 4);
  EXPECT_DOUBLE_EQ(fwd_bytes, 2 * q + 2 * kv);
}

TEST(SimCp, AllGatherGathersKeysAndValuesTwiceAndReduceScattersTheirGradients) {
  const KernelList list = layer_list(llama405b(8, 4, 1, 1, 1, 1, 2), CpComm::AllGather);
  const double gathered = 2.0 * 8192 * 128 * 2;  // the whole sequence's k and v on this rank's group
  EXPECT_DOUBLE_EQ(count(list, Phase::Forward, Collective::AllGather, "").bytes, gathered);
  EXPECT_EQ(count(list, Phase::Forward, Collective::AllGather, "").items, 2);
  EXPECT_DOUBLE_EQ(count(list, Phase::Backward, Collective::AllGather, "").bytes, gathered);
  EXPECT_DOUBLE_EQ(count(list, Phase::Backward, Collective::ReduceScatter, "d").bytes, gathered);
}

TEST(SimCp, GradientsAreReducedOverTheDataAndContextParallelRanks) {
  const CostModel cm(llama405b(8, 2, 1, 4, 1, 4, 2), h100());
  // d c = 8 ranks, each t = 8 apart: one a node.
  EXPECT_DOUBLE_EQ(cm.dp_reduce_scatter(1e9), cm.net.reduce_scatter(1e9 * cm.grad_bytes, 8, 1));
  EXPECT_EQ(cm.node_of_stage(1), 8 * 2 * 4 / 8);
}

TEST(SimCp, ActivationsPerRankAreDividedByC) {
  const RunConfig one = llama405b(8, 1, 1, 1, 1, 1, 2), two = llama405b(8, 2, 1, 1, 1, 1, 2);
  for (Recompute rc : {Recompute::None, Recompute::Full})
    EXPECT_DOUBLE_EQ(layer_activation_bytes(two, rc), layer_activation_bytes(one, rc) / 2);
}

TEST(SimCp, StacksWithoutContextParallelismRefuseIt) {
  RunConfig c = llama405b(8, 2, 1, 1, 1, 1, 2);
  for (StackKind s : {StackKind::Megatron2021, StackKind::Megatron2022, StackKind::MegatronDeepspeed}) {
    c.stack = s;
    c.par.sequence_parallel = false;
    const std::string why = stack_refusal(c);
    EXPECT_NE(why.find("--context-parallel-size 2"), std::string::npos) << why;
    EXPECT_NE(why.find("--stack"), std::string::npos) << why;
  }
  c.stack = StackKind::Mcore;
  EXPECT_EQ(stack_refusal(c), "");
  c.par.cp_comm = CpComm::A2A;
  EXPECT_NE(stack_refusal(c).find("--cp-comm-type a2a"), std::string::npos) << stack_refusal(c);
}

// NVIDIA's DGX Cloud Benchmarking recipe for Llama 3.1 405B, NeMo 24.09, BF16 on H100: t 8,
// c 2, v 7, b 1, 63 micro-batches a pipeline (results/paper/dgxc-llama405b-h100.csv), its optimizer
// distributed_fused_adam with grad_sync_dtype bf16 (llama3.1/llama3.1_405b.yaml of the same
// release): the gradient buffer in bf16, --grad-reduce-in-bf16. Nothing of the model was set from
// it. Tolerance: 15% a point, stated before the comparison was run (the h100-dgx profile's
// efficiencies are carried over from the A100 fit, docs/HARDWARE.md); the error per point is
// printed and given in docs/SIMULATOR.md. Every layout ran on 80 GB: each must fit.
TEST(SimCp, Llama405bOnH100AgainstNvidiasPublishedStepTimes) {
  const CsvTable t = CsvTable::read(std::string(PTDP_SOURCE_DIR) + "/results/paper/dgxc-llama405b-h100.csv",
                                    {"x", "value"});
  std::map<std::string, double> paper_s;
  for (size_t i = 0; i < t.size(); ++i) paper_s[t.text(i, "x")] = t.number(i, "value");
  struct Point {
    int gpus, layers, pp, B;
  };
  const Point points[] = {{32, 7, 1, 126}, {96, 21, 3, 126}, {192, 42, 3, 252},
                          {576, 126, 9, 252}, {1152, 126, 9, 504}, {2304, 126, 9, 1008}};
  double sum = 0;
  for (const Point& p : points) {
    const int dp = p.gpus / (8 * 2 * p.pp);
    RunConfig c = llama405b(8, 2, p.pp, dp, p.pp > 1 ? 7 : 1, p.B, p.layers);
    c.grad_reduce_bf16 = true;
    const SimResult r = simulate(c, h100());
    const double paper = paper_s.at(std::to_string(p.gpus));
    const double err = r.iter_time_s / paper - 1;
    sum += std::abs(err);
    fmt::print("{:>5} GPUs: paper {:.2f} s, simulated {:.2f} s ({:+.1f}%), {:.1f} GB\n", p.gpus, paper, r.iter_time_s,
               100 * err, r.memory.peak / 1e9);
    EXPECT_TRUE(r.memory.fits) << p.gpus << " GPUs: " << r.memory.describe("H100");
    EXPECT_LE(std::abs(err), 0.15) << p.gpus;
  }
  fmt::print("mean absolute error {:.1f}%\n", 100 * sum / 6);
}

}  // namespace
}  // namespace ptdp::sim
