#include "experiments/accept_burnin.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ptdp {

std::vector<BurnInRound> run_burnin(double seconds, double round_seconds, const std::string& unit,
                                    const BurnInLoad& load, const std::function<std::vector<double>()>& train) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<BurnInRound> rounds;
  while (rounds.size() < 2 || elapsed() < seconds) {
    BurnInRound r;
    load(std::clamp(seconds - elapsed(), 0.0, round_seconds), r);
    r.losses = train();
    r.seconds = elapsed();
    rounds.push_back(r);
    const bool same = rounds.size() == 1 || r.losses == rounds.front().losses;
    const std::string sensors = sensor_summary(r.sensors);
    fmt::print("burn-in round {}: {:.0f} of {:.0f} s, gemm {:.4g} {}{}, {} losses {}{}\n", rounds.size(), r.seconds,
               seconds, r.gemm_rate, unit, r.gemm_wrong ? fmt::format(" ({} entries WRONG)", r.gemm_wrong) : "",
               r.losses.size(),
               rounds.size() == 1 ? "(the reference for the next rounds)"
                                  : same ? "equal to round 1's bit for bit" : "differ from round 1's",
               sensors.empty() ? "" : "; " + sensors);
    std::fflush(stdout);
  }
  return rounds;
}

std::string sensor_summary(const std::vector<GpuHealth>& sensors) {
  // Each sensor's range over the GPUs: {lowest, highest}, negative while none reported it.
  double power[2] = {INFINITY, -1}, temp[2] = {INFINITY, -1}, clock[2] = {INFINITY, -1};
  const auto widen = [](double (&r)[2], double v) {
    if (v >= 0) r[0] = std::min(r[0], v), r[1] = std::max(r[1], v);
  };
  std::string held;
  for (const GpuHealth& g : sensors) {
    widen(power, g.power_w);
    widen(temp, g.temperature_c);
    widen(clock, g.sm_clock_mhz);
    if (const int64_t f = clock_faults(g.clock_events))
      held += fmt::format("{}gpu{} {}", held.empty() ? "" : "; ", g.index, clock_event_names(f));
  }
  std::vector<std::string> parts;
  const struct {
    const double* range;
    const char *prefix, *unit;
  } sensors_read[] = {{power, "", " W"}, {temp, "", " C"}, {clock, "SM ", " MHz"}};
  for (const auto& [r, prefix, unit] : sensors_read) {
    if (r[1] < 0) continue;
    parts.push_back(r[0] == r[1] ? fmt::format("{}{:.0f}{}", prefix, r[1], unit)
                                 : fmt::format("{}{:.0f}-{:.0f}{}", prefix, r[0], r[1], unit));
  }
  std::string s = fmt::format("{}", fmt::join(parts, ", "));
  if (sensors.size() > 1) s += fmt::format(" over {} GPUs", sensors.size());
  if (!held.empty()) s += "; clocks held down: " + held;
  return s;
}

namespace {

Check sustained_check(const std::vector<BurnInRound>& rounds, const std::string& unit, const Threshold& min_sustained) {
  size_t slow = 0, fast = 0;
  int64_t checked = 0, wrong = 0;
  for (size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i].gemm_rate < rounds[slow].gemm_rate) slow = i;
    if (rounds[i].gemm_rate > rounds[fast].gemm_rate) fast = i;
    checked += rounds[i].gemm_checked;
    wrong += rounds[i].gemm_wrong;
  }
  const double ratio =
      rounds.empty() || !(rounds[fast].gemm_rate > 0) ? 0 : rounds[slow].gemm_rate / rounds[fast].gemm_rate;
  return {"burnin", "gemm_sustained", "ratio", ">=", ratio, min_sustained.value,
          ratio >= min_sustained.value && wrong == 0,
          rounds.empty() ? "no round ran"
                         : fmt::format("{} rounds over {:.0f} s: slowest round {} (ended at {:.0f} s) {:.4g} {}, "
                                       "fastest round {} {:.4g} {}{}",
                                       rounds.size(), rounds.back().seconds, slow + 1, rounds[slow].seconds,
                                       rounds[slow].gemm_rate, unit, fast + 1, rounds[fast].gemm_rate, unit,
                                       checked ? fmt::format("; {} of {} sampled GEMM entries wrong", wrong, checked)
                                               : ""),
          min_sustained.source};
}

Check loss_check(const std::vector<BurnInRound>& rounds, const std::vector<double>& golden,
                 const std::string& golden_name, const Threshold& tolerance) {
  double worst = 0;
  size_t worst_round = 0, worst_it = 0, repeated = 0;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::vector<double>& got = rounds[r].losses;
    if (r > 0 && got == rounds.front().losses) ++repeated;
    for (size_t i = 0; i < golden.size(); ++i) {
      const double e = i < got.size() && std::isfinite(got[i]) ? std::fabs(got[i] - golden[i]) / std::fabs(golden[i])
                                                               : std::numeric_limits<double>::infinity();
      if (!(e <= worst)) worst = e, worst_round = r, worst_it = i;
    }
  }
  const bool have = worst_round < rounds.size() && worst_it < rounds[worst_round].losses.size();
  return {"burnin", "loss_max_rel_error", "", "<=", worst, tolerance.value, worst <= tolerance.value,
          fmt::format("{} rounds against {}; worst: round {} iteration {}, loss {}, golden {}; {} of {} later "
                      "rounds repeated round 1's losses bit for bit",
                      rounds.size(), golden_name, worst_round + 1, worst_it + 1,
                      have ? fmt::format("{:.7f}", rounds[worst_round].losses[worst_it]) : std::string("missing"),
                      worst_it < golden.size() ? fmt::format("{:.7f}", golden[worst_it]) : std::string("-"),
                      repeated, rounds.empty() ? 0 : rounds.size() - 1),
          tolerance.source};
}

Check clocks_check(const std::vector<BurnInRound>& rounds) {
  const Threshold none{0, "nvmlClocksEventReasons read under load: HW slowdown, SW/HW thermal and HW power brake "
                          "hold the clocks down (the power cap does not count)"};
  size_t with = 0, faulty = 0, first = 0, hottest = 0;
  int hot = -1;
  for (size_t r = 0; r < rounds.size(); ++r) {
    if (rounds[r].sensors.empty()) continue;
    ++with;
    bool fault = false;
    for (const GpuHealth& g : rounds[r].sensors) {
      fault = fault || clock_faults(g.clock_events) != 0;
      if (g.temperature_c > hot) hot = g.temperature_c, hottest = r;
    }
    if (fault && faulty++ == 0) first = r;
  }
  if (with == 0) {
    Check c = skipped_check("burnin", "clock_faults", "rounds", none, "no sensors (NVML) here");
    c.op = "<=";
    return c;
  }
  std::string detail = fmt::format("{} of {} rounds with the clocks held down", faulty, with);
  if (faulty)
    detail += fmt::format("; first in round {} (ended at {:.0f} s): {}", first + 1, rounds[first].seconds,
                          sensor_summary(rounds[first].sensors));
  if (hot >= 0) detail += fmt::format("; hottest round {}: {}", hottest + 1, sensor_summary(rounds[hottest].sensors));
  return {"burnin", "clock_faults", "rounds", "<=", double(faulty), 0, faulty == 0, detail, none.source};
}

}  // namespace

std::vector<Check> burnin_checks(const std::vector<BurnInRound>& rounds, const std::string& unit,
                                 const std::vector<double>& golden, const std::string& golden_name,
                                 const Threshold& min_sustained, const Threshold& tolerance) {
  return {sustained_check(rounds, unit, min_sustained), loss_check(rounds, golden, golden_name, tolerance),
          clocks_check(rounds)};
}

}  // namespace ptdp
