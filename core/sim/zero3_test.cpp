// The sharded data-parallel modes of the performance model: --zero 1 (Megatron's distributed
// optimizer: reduce-scatter, sharded step, all-gather) and --zero 3 (DeepSpeed's engine replayed
// module by module): memory, traffic and what overlaps.
#include <gtest/gtest.h>

#include <cmath>

#include "core/common/error.h"
#include "core/accounting/flops.h"
#include "core/sim/testing/paper_data.h"
#include "core/sim/zero3.h"

namespace ptdp::sim {
namespace {

using namespace ptdp::sim::testing;

RunConfig gpt3(int tp, int pp, int dp, int b, int B, int zero, Recompute rc = Recompute::Full) {
  RunConfig c = paper_run(96, 12288, 96, tp, pp, dp, b, B);
  c.par.recompute = rc;
  c.par.zero = zero;
  return c;
}

double total(const PassCost& p) { return p.total(); }

TEST(SimModules, TheFourModulesAddUpToTheLayer) {
  for (int t : {1, 8})
    for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const RunConfig c = gpt3(t, 1, 8, 2, 16, 0, rc);
      const CostModel cm(c, selene());
      double f = 0, r = 0, b = 0, w = 0, pre = 0;
      for (const ModuleCosts& m : cm.modules) {
        f += total(m.forward);
        r += total(m.recompute);
        b += total(m.backward);
        w += m.weights + m.biases;
        pre += total(m.forward_pre) + total(m.backward_pre);
        EXPECT_LE(total(m.forward_pre), total(m.forward));
        EXPECT_LE(total(m.backward_pre), total(m.backward));
      }
      EXPECT_NEAR(f, total(cm.layer.forward), 1e-12) << "t=" << t;
      EXPECT_NEAR(r, total(cm.layer.recompute), 1e-12) << "t=" << t;
      EXPECT_NEAR(b, total(cm.layer.backward), 1e-12) << "t=" << t;
      EXPECT_NEAR(w, cm.params_per_layer, 1e-6 * w);
      EXPECT_GT(pre, 0);
      EXPECT_NEAR(cm.modules[kModuleFc].weights, 4.0 * 12288 * 12288 / t, 1);
    }
}

TEST(SimZero1, StateShardsMasterWeightsAndAdamOverTheDataParallelRanks) {
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::F16, 1, 1), 20.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::F16, 1, 8), 4.0 + 2.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::F32, 1, 4), 8.0 + 2.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::Bf16, 3, 16), 20.0 / 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::F16, 0, 16), 20.0);
  const RunConfig plain = gpt3(8, 12, 8, 1, 96, 0), zero1 = gpt3(8, 12, 8, 1, 96, 1);
  const MemoryVerdict a = memory_verdict(plain, selene()), b = memory_verdict(zero1, selene());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_DOUBLE_EQ(a.stages[s].params, b.stages[s].params);
    // fp16 (v2.5): the fp32 master gradients exist only inside the step (memory_model.h, state_bytes).
    EXPECT_NEAR(b.stages[s].state / a.stages[s].state, (4 + 12.0 / 8) / 16, 1e-12);
    EXPECT_NEAR(b.stages[s].step_state / a.stages[s].step_state, (4 + 16.0 / 8) / 20, 1e-12);
    EXPECT_DOUBLE_EQ(a.stages[s].activations, b.stages[s].activations);
  }
}

TEST(SimZero1, ReduceScatterAndAllGatherMoveWhatTheAllReduceDid) {
  const RunConfig c = gpt3(8, 12, 8, 1, 96, 1);
  const CostModel cm(c, selene());
  const double params = 1.8e9;
  // A ring all-reduce is a reduce-scatter then an all-gather: the same bytes, in two collectives.
  EXPECT_NEAR(cm.dp_reduce_scatter(params) + cm.dp_allgather(params), cm.dp_allreduce(params),
              0.02 * cm.dp_allreduce(params));
  EXPECT_NEAR(cm.dp_reduce_scatter(params), cm.dp_allgather(params), 1e-9);
}

TEST(SimZero1, StepsOneDthOfTheParametersAndGathersThemAfterwards) {
  const RunConfig plain = gpt3(8, 12, 8, 1, 96, 0), zero1 = gpt3(8, 12, 8, 1, 96, 1);
  const SimResult a = simulate(plain, selene()), b = simulate(zero1, selene());
  EXPECT_DOUBLE_EQ(a.pipeline_time_s, b.pipeline_time_s);  // the pipeline is the same
  EXPECT_NEAR(b.optimizer_s, (a.optimizer_s - 20 * selene().launch_overhead_s) / 8 + 20 * selene().launch_overhead_s,
              1e-9);
  // Same traffic after the flush, a smaller optimizer step: zero 1 is not slower here.
  EXPECT_LT(b.iter_time_s, a.iter_time_s + 0.01 * a.iter_time_s);
  EXPECT_LT(b.memory.peak, a.memory.peak);
}

TEST(SimZero3, RefusesModelParallelism) {
  RunConfig c = gpt3(8, 1, 4, 1, 16, 3);
  EXPECT_THROW(simulate(c, selene()), UsageError);
  c = gpt3(1, 2, 4, 1, 16, 3);
  EXPECT_THROW(simulate(c, selene()), UsageError);
}

TEST(SimZero3, GathersEveryWeightForForwardAndRecomputeAndAllButTheReusedOneForBackward) {
  const RunConfig c = gpt3(1, 1, 384, 4, 1536, 3);
  const SimResult r = simulate(c, selene());
  const double layer_weights = 96 * 12.0 * 12288 * 12288;
  const double vocab = c.model.padded_vocab(1) * 12288.0;
  // Forward and recomputed forward gather all four weights; the backward finds fc2 still there
  // (used again right after its recomputation, DeepSpeed's reuse distance) and gathers the rest.
  const double elements = layer_weights * (1 + 1 + 8.0 / 12) + 3 * vocab + 2 * 2048.0 * 12288;
  EXPECT_NEAR(r.zero3.gather_bytes, 2 * elements, 1e-6 * r.zero3.gather_bytes);
  // Every gradient is reduce-scattered once (the small persistent tensors' too).
  EXPECT_NEAR(r.zero3.reduce_bytes, 2 * double(params_exact(c.model)), 1e-3 * r.zero3.reduce_bytes);
  EXPECT_EQ(r.zero3.gathers, 96 * 11 + 5);

  // Keeping nothing: fc2 and the output layer's word embedding are gathered again for backward,
  // which costs time where the traffic is the bottleneck (one sample per GPU).
  SimOptions keep_nothing;
  keep_nothing.zero3.max_reuse_distance = 0;
  const SimResult r0 = simulate(c, selene(), keep_nothing);
  EXPECT_NEAR(r0.zero3.gather_bytes - r.zero3.gather_bytes, 2 * (96 * 4.0 * 12288 * 12288 + vocab),
              1e-6 * r0.zero3.gather_bytes);
  const RunConfig one = gpt3(1, 1, 1536, 1, 1536, 3);
  EXPECT_GT(simulate(one, selene(), keep_nothing).iter_time_s, simulate(one, selene()).iter_time_s);
}

TEST(SimZero3, WithoutRecomputationTheBackwardGathersOnceMore) {
  const RunConfig full = gpt3(1, 1, 1536, 1, 1536, 3), none = gpt3(1, 1, 1536, 1, 1536, 3, Recompute::None);
  const SimResult a = simulate(full, selene()), b = simulate(none, selene());
  EXPECT_NEAR(b.zero3.gather_bytes / a.zero3.gather_bytes, 2.0 / (2 + 8.0 / 12), 0.02);
  EXPECT_LT(b.iter_time_s, a.iter_time_s);
}

TEST(SimZero3, HidesTheTrafficBehindComputeWhenTheNetworkIsFast) {
  HardwareProfile fast = selene();
  fast.nic_bw *= 1000;
  fast.network_latency_s = 0;
  const RunConfig c = gpt3(1, 1, 384, 4, 1536, 3);
  const SimResult r = simulate(c, fast);
  // Only the first gather and the last reduce-scatter are left uncovered.
  EXPECT_LT(r.zero3.exposed_comm_s, 0.01 * r.zero3.compute_s);
  EXPECT_NEAR(r.iter_time_s, r.zero3.compute_s + r.optimizer_s, 0.01 * r.iter_time_s);
  // On the paper's network the same run is bound by the parameter traffic.
  const SimResult slow = simulate(c, selene());
  EXPECT_GT(slow.zero3.comm_s, slow.zero3.compute_s);
  EXPECT_GT(slow.iter_time_s, slow.zero3.comm_s);
}

TEST(SimZero3, NodeAwareCollectivesWouldMakeItComputeBound) {
  // The assumption that matters most (docs/SIMULATOR.md): the paper's ZeRO-3 moved each rank's
  // shards at one NIC's bandwidth. NCCL's node-aware rings spread a node's traffic over its 8 NICs.
  const RunConfig c = gpt3(1, 1, 1536, 1, 1536, 3);
  SimOptions hier;
  hier.zero3.flat_collectives = false;
  const SimResult flat = simulate(c, selene()), spread = simulate(c, selene(), hier);
  EXPECT_GT(spread.tflops_per_gpu, 2.5 * flat.tflops_per_gpu);
  // 8 NICs per node instead of one per rank; the per-node latency is the same in both.
  const double ratio = flat.zero3.comm_s / spread.zero3.comm_s;
  EXPECT_GT(ratio, 5.0);
  EXPECT_LT(ratio, 8.0);
}

TEST(SimZero3, StateIsShardedAndTheGatheredLayersAreCounted) {
  const RunConfig c = gpt3(1, 1, 384, 4, 1536, 3);
  const MemoryVerdict v = memory_verdict(c, selene());
  ASSERT_EQ(v.stages.size(), 1u);
  const double P = params_exact(c.model);
  const double persistent = zero3_persistent_params(c, Zero3Options{});
  EXPECT_NEAR(persistent, 96 * (3 + 1 + 4 + 1 + 4) * 12288.0 + 2 * 12288.0, 1);
  // 16/d bytes a parameter in the passes, 20/d in the step (the fp32 gradient made there).
  EXPECT_NEAR(v.stages[0].state, P * 16 / 384 + persistent * 4 * (1 - 1.0 / 384), 1e6);
  EXPECT_NEAR(v.stages[0].step_state, P * 20 / 384 + persistent * 4 * (1 - 1.0 / 384), 1e6);
  // The working set holds fc and the prefetched fc2, the largest gradient (the word embedding's,
  // larger than fc's here) and two reduce buckets.
  const double gathered = zero3_gathered_bytes(c, Zero3Options{});
  const double vocab = c.model.padded_vocab(1) * 12288.0;
  EXPECT_NEAR(gathered, 2 * (8.0 * 12288 * 12288 + std::max(vocab, 4.0 * 12288 * 12288) + 2 * 5e8), 1);
  EXPECT_TRUE(v.fits) << v.describe("A100");
  EXPECT_NE(v.describe("A100").find("ZeRO-3 over 384 ranks"), std::string::npos);
  // The paper: the 530B model did not fit on 560 GPUs with micro-batch 4.
  const RunConfig big = table2_run("ZeRO-3", 529.6, 560, 2240, 4);
  EXPECT_FALSE(memory_verdict(big, selene()).fits);
}

TEST(SimZero3, The530bRowRanOn640GpusAndDidNotFitOn560) {
  // NAR21 Table 2's asterisk: 530B with micro-batch 4 did not fit on 560 GPUs, so it ran on 640.
  // The two bound its memory to a window of 1.9 GB (16/d bytes of state a parameter).
  const RunConfig ran = table2_run("ZeRO-3", 529.6, 640, 2560, 4);
  const RunConfig refused = table2_run("ZeRO-3", 529.6, 560, 2240, 4);
  const MemoryVerdict v = memory_verdict(ran, selene());
  EXPECT_TRUE(v.fits) << v.describe("A100");
  EXPECT_FALSE(memory_verdict(refused, selene()).fits);
  // The checkpoints (105 layer inputs, and the last layer's output kept for the head) in
  // DeepSpeed's contiguous buffer take no allocator overhead; scattered over the caching
  // allocator's blocks as Megatron keeps activations, they would (and the run would not fit).
  const double inputs = (105 + 1) * 2.0 * 4 * 2048 * 20480;
  EXPECT_NEAR(v.stages[0].activations, inputs, 1e-6 * inputs);
  Zero3Options scattered;
  scattered.contiguous_checkpoints = false;
  const MemoryVerdict w = memory_verdict(ran, selene(), {}, scattered);
  EXPECT_NEAR(w.stages[0].activations, inputs * selene().allocator_overhead, 1e-6 * inputs);
  EXPECT_FALSE(w.fits);
}

TEST(SimZero3, MicroBatchesRepeatTheTrace) {
  const RunConfig one = gpt3(1, 1, 384, 1, 384, 3), four = gpt3(1, 1, 384, 1, 1536, 3);
  const SimResult a = simulate(one, selene()), b = simulate(four, selene());
  EXPECT_EQ(four.par.num_microbatches(), 4);
  EXPECT_NEAR(b.zero3.gather_bytes, 4 * a.zero3.gather_bytes, 1e-6 * b.zero3.gather_bytes);
  EXPECT_NEAR(b.zero3.compute_s, 4 * a.zero3.compute_s, 1e-6 * b.zero3.compute_s);
  EXPECT_NEAR(b.zero3.end_s, 4 * a.zero3.end_s, 0.02 * b.zero3.end_s);
}

}  // namespace
}  // namespace ptdp::sim
