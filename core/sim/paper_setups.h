// The settings of the paper's Table 1 and Figures 11-18 as RunConfigs (from the paper and
// Megatron-LM's SC21 scripts, see /work/shared/paper/README.md section 4), keyed the way
// results/paper/figures.csv names its points (figure, series, x).
#pragma once
#include <string>

#include "core/runtime/run_config.h"

namespace ptdp::sim {

// A paper-style RunConfig: s = 2048, V = 51200, fp16, full recompute, scatter/gather on, 1F1B
// (interleaved when v > 1), backend cuda. Validated (UsageError on an impossible layout).
RunConfig paper_run(int layers, int hidden, int heads, int tp, int pp, int dp, int micro_batch, int global_batch,
                    int vpp = 1);

struct FigurePointSetup {
  RunConfig cfg;
  bool sequences_per_s = false;  // the figure plots sequences/s (Fig. 17), not TFLOP/s per GPU
};

// The configuration of one plotted point of Figures 11-18: `series` and `x` as in figures.csv
// (e.g. "fig13", "Batch size = 128", "(8, 8)"). UsageError for a figure or point it does not know.
FigurePointSetup figure_point(const std::string& figure, const std::string& series, const std::string& x);

}  // namespace ptdp::sim
