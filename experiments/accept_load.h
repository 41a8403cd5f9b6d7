// Whether other work on the machine may have distorted a CPU check of `ptdp accept`: the load
// average before the run (/proc/loadavg), the CPU time other processes took while the check ran
// (/proc/stat's busy time less this process's own), and the spread of the check's repetitions. A
// rate measured under load is named in a warning, and a FAIL under load says so (docs/ACCEPTANCE.md,
// "Load").
#pragma once
#include <string>

namespace ptdp {

// The machine's CPU time so far: every CPU's busy time (steal included), and this process's.
struct CpuTimes {
  double busy_s = -1, self_s = -1;  // -1: /proc/stat not readable
  double wall_s = 0;                // steady clock
  int cpus = 1;
};
CpuTimes cpu_times_now();

// What was seen while one check ran (each -1 when unknown).
struct LoadSigns {
  double load_per_cpu = -1;     // 1-minute load average per CPU before the run
  double others_per_cpu = -1;   // other processes' CPU time per CPU over the check's time
  double median_over_best = 1;  // the repetitions' median rate over their best
};

// The other processes' share of the CPUs between two readings (0 to 1), or -1.
double others_per_cpu(const CpuTimes& before, const CpuTimes& after);

// The least median/best of a check's repetitions a quiet machine gives, with a margin (this
// project's VM at quiet moments: 0.69 at worst, the all-reduce's, docs/ACCEPTANCE.md); below it the
// repetitions were disturbed.
inline constexpr double kQuietMedianOverBest = 0.5;

// The signs of load in words ("the load average was 3.10 on 2 CPUs (1.55 per CPU) before the
// run; other processes took 0.80 of the CPUs while it ran"), each sign above `max_per_cpu`
// (accept.health.max_load_per_cpu) or below kQuietMedianOverBest; empty when there is none.
std::string load_note(const LoadSigns& s, double max_per_cpu, double load1, int cpus);

}  // namespace ptdp
