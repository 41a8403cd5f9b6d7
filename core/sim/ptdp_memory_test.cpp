// ptdp's executor's memory (--stack ptdp) against the peaks its allocator measured on a GPU.
#include "core/sim/ptdp_memory.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "core/sim/memory_model.h"
#include "core/sim/paper_setups.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

RunConfig ptdp_run(int layers, int hidden, int heads, int b, Precision precision, Recompute mode) {
  RunConfig c = paper_run(layers, hidden, heads, 1, 1, 1, b, b);
  c.stack = StackKind::Ptdp;
  c.precision = precision;
  c.par.recompute = mode;
  return c;
}

TEST(SimPtdpMemory, StateIsTheWeightItsF32GradientMasterAndMoments) {
  RunConfig c = ptdp_run(4, 4096, 128, 1, Precision::F16, Recompute::Full);
  EXPECT_DOUBLE_EQ(ptdp_state_bytes_per_param(c, precision_knobs(c)), 2 + 4 + 4 + 8);
  c.precision = Precision::F32;  // the weight is its own master
  EXPECT_DOUBLE_EQ(ptdp_state_bytes_per_param(c, precision_knobs(c)), 4 + 4 + 8);
  c.precision = Precision::Bf16;
  c.par.zero = 1;
  c.par.dp = 8;
  EXPECT_DOUBLE_EQ(ptdp_state_bytes_per_param(c, precision_knobs(c)), 2 + 4 + 12.0 / 8);
}

// Figure 7's model (l 4, h 4096, a 128, s 2048, V 51200, f16, full recomputation, one GPU) as
// `ptdp train --backend cuda` ran it on an H200: peak_mem_gb of
// results/gpu/h200-20261126-3263931/fig7.csv (the allocator's high-water mark of bytes in use).
// The peak is the attention backward of the recomputed layer: the probabilities and dP, s x s
// per head each, beside the layer's cache and gradients.
TEST(SimPtdpMemory, Figure7PeaksAreWithinTenPercentOfTheMeasuredOnes) {
  const std::pair<int, double> measured[] = {{1, 21.542}, {2, 24.3607}, {4, 29.998}, {8, 41.2726}, {16, 63.8218}};
  for (const auto& [b, gb] : measured) {
    const RunConfig c = ptdp_run(4, 4096, 128, b, Precision::F16, Recompute::Full);
    const double predicted = memory_verdict(c, selene()).stages[0].in_use() / 1e9;
    std::printf("ptdp memory | fig7 b=%d: measured %.1f GB, predicted %.1f GB (%+.1f%%)\n", b, gb, predicted,
                100 * (predicted / gb - 1));
    EXPECT_NEAR(predicted / gb, 1.0, 0.10) << "b=" << b << ": " << predicted << " GB predicted, " << gb;
  }
}

// The PyTorch comparison shapes (docs/PYTORCH.md; bf16, no recomputation, one GPU): ptdp's rows
// of results/gpu/h200-20261126-3263931/compare_pytorch.csv, "peak" in their note column.
TEST(SimPtdpMemory, ThePyTorchComparisonShapesAreWithinTenPercentOfTheMeasuredPeaks) {
  RunConfig llama = ptdp_run(4, 4096, 32, 2, Precision::Bf16, Recompute::None);
  llama.model.arch = Arch::Llama;
  llama.model.vocab_size = 32000;
  const std::pair<RunConfig, double> runs[] = {{ptdp_run(24, 2048, 16, 4, Precision::Bf16, Recompute::None), 51.6772},
                                               {llama, 25.0413}};
  for (const auto& [c, gb] : runs) {
    const double predicted = memory_verdict(c, selene()).stages[0].in_use() / 1e9;
    std::printf("ptdp memory | %s h=%d: measured %.1f GB, predicted %.1f GB (%+.1f%%)\n",
                std::string(enum_name(c.model.arch)).c_str(), c.model.hidden, gb, predicted, 100 * (predicted / gb - 1));
    EXPECT_NEAR(predicted / gb, 1.0, 0.10);
  }
}

TEST(SimPtdpMemory, TheExecutorKeepsTheLayerInputUnderFullRecomputation) {
  const RunConfig c = ptdp_run(4, 4096, 128, 2, Precision::F16, Recompute::Full);
  EXPECT_DOUBLE_EQ(ptdp_layer_kept_bytes(c, Recompute::Full), 2.0 * 2 * 2048 * 4096);
  const double probs = 2.0 * 2 * 128 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(ptdp_layer_kept_bytes(c, Recompute::None) - ptdp_layer_kept_bytes(c, Recompute::Selective), probs);
  // The backward holds the probabilities and dP beside the rest, whatever the mode kept.
  EXPECT_GT(ptdp_backward_peak_bytes(c, Recompute::Full), 2 * probs);
}

}  // namespace
}  // namespace ptdp::sim
