#include "experiments/accept_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ptdp {

namespace {

double seconds(const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; }

}  // namespace

CpuTimes cpu_times_now() {
  CpuTimes t;
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  t.cpus = std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN)));
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) != 0) return t;
  // proc(5): "cpu user nice system idle iowait irq softirq steal guest guest_nice", in clock ticks;
  // guest time is already counted in user.
  std::ifstream f("/proc/stat");
  std::string line, label;
  if (!f || !std::getline(f, line)) return t;
  std::istringstream in(line);
  double v[8] = {};
  if (!(in >> label) || label != "cpu") return t;
  for (double& x : v)
    if (!(in >> x)) return t;
  const double tick = double(sysconf(_SC_CLK_TCK));
  if (!(tick > 0)) return t;
  const double idle = v[3] + v[4];  // idle and iowait
  const double total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  t.busy_s = (total - idle) / tick;
  t.self_s = seconds(self.ru_utime) + seconds(self.ru_stime);
  return t;
}

double others_per_cpu(const CpuTimes& before, const CpuTimes& after) {
  const double wall = after.wall_s - before.wall_s;
  if (before.busy_s < 0 || after.busy_s < 0 || !(wall > 0)) return -1;
  const double others = (after.busy_s - before.busy_s) - (after.self_s - before.self_s);
  return std::clamp(others / (wall * after.cpus), 0.0, 1.0);
}

std::string load_note(const LoadSigns& s, double max_per_cpu, double load1, int cpus) {
  std::string note;
  auto add = [&](const std::string& sign) { note += (note.empty() ? "" : "; ") + sign; };
  if (s.load_per_cpu > max_per_cpu)
    add(fmt::format("the load average was {:.2f} on {} CPUs ({:.2f} per CPU, above {:.2g}) before the run", load1,
                    cpus, s.load_per_cpu, max_per_cpu));
  if (s.others_per_cpu > max_per_cpu)
    add(fmt::format("other processes took {:.2f} of the CPUs while it ran (above {:.2g})", s.others_per_cpu,
                    max_per_cpu));
  if (s.median_over_best < kQuietMedianOverBest)
    add(fmt::format("its repetitions spread: the median is {:.0f}% of the best (a quiet machine: {:.0f}% or more)",
                    100 * s.median_over_best, 100 * kQuietMedianOverBest));
  return note;
}

}  // namespace ptdp
