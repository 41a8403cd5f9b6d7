// `ptdp reproduce NAME --mode run --plan-jobs`: the launches a sweep needs, and only those: one
// per world size of its training configurations (a launch runs those of its size and skips the
// others), Fig. 8's one-rank estimate as a one-rank job, Fig. 6 (a formula) as nothing to launch.
// At --scale small the ranks are CPU processes (or threads here), so no nodes or GPUs are booked.
#pragma once
#include <string>
#include <vector>

#include "experiments/sweep.h"

namespace ptdp {

struct PlannedSweep {
  const SweepSpec* spec;
  const std::vector<SweepPoint>* points;
};

struct LaunchPlanOptions {
  std::string name, out;  // the artefact (or all) and --out, for the printed commands
  SweepScale scale = SweepScale::Paper;
  int gpus_per_node = 8;
};

// Prints the plan to stdout.
void print_launch_plan(const std::vector<PlannedSweep>& sweeps, const LaunchPlanOptions& o);

}  // namespace ptdp
