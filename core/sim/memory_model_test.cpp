// The memory model: bytes of state per parameter, activations per recompute mode and schedule,
// and an out-of-memory verdict with the numbers for layouts that cannot fit.
#include "core/sim/memory_model.h"

#include <gtest/gtest.h>

#include "core/sim/paper_setups.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

TEST(SimMemory, MixedPrecisionStateIsTwentyBytesAParameter) {
  EXPECT_EQ(state_bytes_per_param(Precision::F16), 20.0);
  EXPECT_EQ(state_bytes_per_param(Precision::Bf16), 20.0);
  EXPECT_EQ(state_bytes_per_param(Precision::F32), 16.0);
  // 1T on 3072 GPUs (Table 1): stage 0 holds two layers and the word embedding shard.
  const RunConfig c = paper_run(128, 25600, 160, 8, 64, 6, 1, 3072);
  const MemoryVerdict v = memory_verdict(c, selene());
  const double h = 25600;
  const double params = 2 * (12 * h * h / 8 + 7 * h / 8 + 6 * h) + 51200.0 / 8 * h + 2048 * h;
  EXPECT_DOUBLE_EQ(v.stages[0].params, params);
  // fp16 under v2.5: the fp32 master gradients exist only inside the optimizer step.
  EXPECT_DOUBLE_EQ(v.stages[0].state, 16 * params);
  EXPECT_DOUBLE_EQ(v.stages[0].step_state, 20 * params);
  EXPECT_TRUE(v.fits) << v.describe("A100");
}

TEST(SimMemory, RecomputationKeepsLessThanSelectiveKeepsLessThanNone) {
  RunConfig c = paper_run(80, 12288, 96, 8, 16, 1, 1, 16);
  const double full = layer_activation_bytes(c, Recompute::Full);
  const double sel = layer_activation_bytes(c, Recompute::Selective);
  const double none = layer_activation_bytes(c, Recompute::None);
  const double sbh = 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(full, 2 * sbh);                             // the layer input, fp16
  EXPECT_DOUBLE_EQ(sel, sbh * (10 + 24.0 / 8));                // Korthikanti et al., no SP
  EXPECT_DOUBLE_EQ(none, sel + 5.0 * 96 * 2048 * 2048 / 8);    // + softmax, mask, dropout output
}

// The working set is the recomputed layer's backward peak by liveness. Fig. 7 at b = 16 (a = 128,
// h = 4096, s = 2048, one GPU): the attention core's backward holds the softmax output, the
// dropout mask and output and the scores' gradient (7 bytes a score), beside the norm's input and
// output, the residual stream's gradient and five b*s*h tensors (q|k|v, the core's output and
// their gradients); Korthikanti's none-recompute total plus every gradient would be 4 GB more.
TEST(SimMemory, WorkingSetIsTheLayersBackwardPeakByLiveness) {
  RunConfig c = paper_run(4, 4096, 128, 1, 1, 1, 16, 16);
  c.model.vocab_size = 8;  // the logits' working set stays below the layer's
  const MemoryVerdict v = memory_verdict(c, selene());
  const double sbh = 16.0 * 2048 * 4096, scores = 128.0 * 2048 * 2048 * 16;
  const double attention_peak = 7 * scores + 2 * sbh * 3 + 5 * 2 * sbh;
  // Not scaled by the allocator overhead: each layer's backward reuses the blocks the previous
  // one freed (memory_model.cpp, ActivationTerms).
  EXPECT_DOUBLE_EQ(v.stages[0].working, attention_peak);
  // With flash attention (mcore) no score is kept: the MLP's backward is the peak.
  c.stack = StackKind::Mcore;
  const double mlp_peak = layer_activation_bytes(c, Recompute::None) + 2 * (sbh + 8 * sbh);
  EXPECT_DOUBLE_EQ(memory_verdict(c, selene()).stages[0].working, mlp_peak);
}

// The paper's Fig. 7 ran b = 1..16 on one 80 GB A100 (the 1B model: l 4, h 4096, a 128): the
// largest must fit. 16 bytes a parameter during the passes (fp16: the fp32 master gradients exist
// only in the step), the attention core's backward (60.1 GB of the 62.3 GB working set), the four
// layer inputs and the output kept, 5 GB reserved: 85.3 of 85.9 GB.
TEST(SimMemory, Figure7sLargestMicroBatchFitsOnOneA100) {
  const RunConfig c = paper_run(4, 4096, 128, 1, 1, 1, 16, 16);
  const MemoryVerdict v = memory_verdict(c, selene());
  EXPECT_TRUE(v.fits) << v.describe("A100 80GB");
  EXPECT_GT(v.peak, 0.95 * v.capacity);  // and only just
}

TEST(SimMemory, OneFOneBHoldsAtMostPMicrobatchesAndGPipeHoldsAll) {
  RunConfig c = paper_run(32, 3840, 32, 1, 8, 1, 1, 64);
  EXPECT_EQ(peak_in_flight(c, 0), 8);
  EXPECT_EQ(peak_in_flight(c, 7), 1);
  c.par.schedule = ScheduleKind::GPipe;
  EXPECT_EQ(peak_in_flight(c, 0), 64);
  EXPECT_EQ(peak_in_flight(c, 7), 64);
  c.par.schedule = ScheduleKind::Interleaved;
  c.par.vpp = 2;
  // Megatron's warm-up on stage 0: (p-1)*2 + (v-1)*p = 22 chunk forwards, then one more.
  EXPECT_EQ(peak_in_flight(c, 0), 23);
}

TEST(SimMemory, ModelThatCannotFitIsAnOutOfMemoryVerdictWithTheNumbers) {
  const RunConfig c = paper_run(128, 25600, 160, 8, 1, 1, 1, 8);  // 1T on one node
  const MemoryVerdict v = memory_verdict(c, selene());
  EXPECT_FALSE(v.fits);
  const std::string d = v.describe("NVIDIA A100-SXM4-80GB");
  for (const char* needle : {"out of memory", "stage 0 needs", "GB", "state", "activations", "85.9 GB"})
    EXPECT_NE(d.find(needle), std::string::npos) << d;
}

TEST(SimMemory, Fig17WithoutRecomputationStopsFittingAboveBatchEight) {
  for (int B : {1, 2, 4, 8, 16, 32}) {
    RunConfig c = paper_run(80, 12288, 96, 8, 16, 1, 1, B);
    c.par.recompute = Recompute::None;
    EXPECT_EQ(memory_verdict(c, selene()).fits, B <= 8) << "B=" << B;
    c.par.recompute = Recompute::Full;
    EXPECT_TRUE(memory_verdict(c, selene()).fits) << "B=" << B;
  }
}

}  // namespace
}  // namespace ptdp::sim
