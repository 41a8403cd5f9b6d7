#include "experiments/reproduce_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ptdp {

namespace {

// The ranks each launch needs -> "spec (n configuration(s))"; and the specs no launch runs.
struct Launches {
  std::map<int, std::vector<std::string>> by_size;
  std::vector<std::string> none;  // "fig6: ..." lines
};

Launches launches_of(const std::vector<PlannedSweep>& sweeps) {
  Launches l;
  for (const PlannedSweep& s : sweeps) {
    const SweepSpec& spec = *s.spec;
    if (spec.kind == SweepKind::Bubble) {
      l.none.push_back(fmt::format("{}: the paper's formula (p-1)/m, nothing to run or launch: `ptdp reproduce {} "
                                   "--mode simulate` writes its rows",
                                   spec.name, spec.name));
      continue;
    }
    if (spec.kind == SweepKind::Eq1) {  // t_f(b), t_b(b) measured by one rank, once per b
      l.by_size[1].push_back(fmt::format("{} ({} estimate(s) from one rank's measurements)", spec.name,
                                         s.points->size()));
      continue;
    }
    std::map<int, int> count;
    for (const SweepPoint& pt : *s.points) ++count[pt.cfg.ranks];
    for (const auto& [ranks, n] : count)
      l.by_size[ranks].push_back(fmt::format("{} ({} configuration(s))", spec.name, n));
  }
  return l;
}

}  // namespace

void print_launch_plan(const std::vector<PlannedSweep>& sweeps, const LaunchPlanOptions& o) {
  const Launches l = launches_of(sweeps);
  for (const std::string& line : l.none) fmt::print("{}\n", line);
  if (l.by_size.empty()) return;
  const std::string cmd = fmt::format("reproduce {} --mode run --scale {} --out {}", o.name,
                                      o.scale == SweepScale::Small ? "small" : "paper", o.out);
  if (o.scale == SweepScale::Small) {
    // CPU ranks: every configuration runs here as threads; MPI processes only spread them.
    fmt::print("{} --scale small: the ranks are CPU threads or processes, no GPUs: `ptdp {}` runs every configuration "
               "here, ranks as threads; or {} launch(es) under Open MPI, one per world size, each running the "
               "configurations of its size:\n",
               o.name, cmd, l.by_size.size());
    for (const auto& [ranks, what] : l.by_size)
      fmt::print("{:>6} rank(s): {}\n  mpirun -np {} --oversubscribe build/ptdp {}\n", ranks, fmt::join(what, ", "),
                 ranks, cmd);
    return;
  }
  const int g = o.gpus_per_node;
  fmt::print("reproduce {} --mode run --scale paper: {} launch(es), one per world size; each runs the configurations "
             "of its size and skips the others ({} GPUs per node)\n",
             o.name, l.by_size.size(), g);
  for (const auto& [ranks, what] : l.by_size) {
    const int nodes = (ranks + g - 1) / g;
    fmt::print("{:>6} ranks on {} node(s): {}\n", ranks, nodes, fmt::join(what, ", "));
    fmt::print("  sbatch --nodes={} --ntasks={} --ntasks-per-node={} scripts/launch/ptdp.sbatch {}\n", nodes, ranks,
               std::min(ranks, g), cmd);
  }
}

}  // namespace ptdp
