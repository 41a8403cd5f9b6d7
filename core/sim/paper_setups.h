// The settings of the paper's Table 1 and Figures 11-18 as RunConfigs (from the paper and
// Megatron-LM's SC21 scripts, see /work/shared/paper/README.md section 4), keyed the way
// results/paper/figures.csv names its points (figure, series, x).
#pragma once
#include <string>

#include "core/config/run_config.h"

namespace ptdp::sim {

// A paper-style RunConfig: s = 2048, V = 51200, fp16, full recompute, scatter/gather on, 1F1B
// (interleaved when v > 1), backend cuda. Validated (UsageError on an impossible layout).
RunConfig paper_run(int layers, int hidden, int heads, int tp, int pp, int dp, int micro_batch, int global_batch,
                    int vpp = 1);

struct FigurePointSetup {
  RunConfig cfg;
  bool sequences_per_s = false;  // the figure plots sequences/s (Fig. 17), not TFLOP/s per GPU
};

// One row of Table 2 (and Figure 10): `scheme` "ZeRO-3" (DeepSpeed ZeRO-3, no model parallelism:
// t = p = 1, d = gpus, full recomputation) or "PTD-P" (175B: t = 8, p = 12, interleaved v = 4 as the
// GPT-3 runs of Figs. 12/18; 530B: t = 8, p = 35, v = 3 as Table 1), GPT-3 175B (params_b 174.6)
// or the 530B model (529.6). UsageError for anything else.
RunConfig table2_run(const std::string& scheme, double params_b, int gpus, int global_batch, int micro_batch);

// The configuration of one plotted point of Figures 11-18: `series` and `x` as in figures.csv
// (e.g. "fig13", "Batch size = 128", "(8, 8)"). UsageError for a figure or point it does not know.
FigurePointSetup figure_point(const std::string& figure, const std::string& series, const std::string& x);

}  // namespace ptdp::sim
