#include "experiments/accept_burnin.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ptdp {

std::vector<BurnInRound> run_burnin(double seconds, const std::string& unit, const std::function<double()>& gemm,
                                    const std::function<std::vector<double>()>& train) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<BurnInRound> rounds;
  while (rounds.size() < 2 || elapsed() < seconds) {
    BurnInRound r;
    r.gemm_rate = gemm();
    r.losses = train();
    r.seconds = elapsed();
    rounds.push_back(r);
    const bool same = rounds.size() == 1 || r.losses == rounds.front().losses;
    fmt::print("burn-in round {}: {:.0f} of {:.0f} s, gemm {:.4g} {}, {} losses {}\n", rounds.size(), r.seconds,
               seconds, r.gemm_rate, unit, r.losses.size(),
               rounds.size() == 1 ? "(the reference for the next rounds)"
                                  : same ? "equal to round 1's bit for bit" : "differ from round 1's");
    std::fflush(stdout);
  }
  return rounds;
}

std::vector<Check> burnin_checks(const std::vector<BurnInRound>& rounds, const std::string& unit,
                                 const std::vector<double>& golden, const std::string& golden_name,
                                 const Threshold& min_sustained, const Threshold& tolerance) {
  size_t slow = 0, fast = 0;
  for (size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i].gemm_rate < rounds[slow].gemm_rate) slow = i;
    if (rounds[i].gemm_rate > rounds[fast].gemm_rate) fast = i;
  }
  const double ratio = rounds.empty() || !(rounds[fast].gemm_rate > 0) ? 0 : rounds[slow].gemm_rate / rounds[fast].gemm_rate;
  Check sustained{"burnin", "gemm_sustained", "ratio", ">=", ratio, min_sustained.value, ratio >= min_sustained.value,
                  rounds.empty() ? "no round ran"
                                 : fmt::format("{} rounds over {:.0f} s: slowest round {} (ended at {:.0f} s) {:.4g} "
                                               "{}, fastest round {} {:.4g} {}",
                                               rounds.size(), rounds.back().seconds, slow + 1, rounds[slow].seconds,
                                               rounds[slow].gemm_rate, unit, fast + 1, rounds[fast].gemm_rate, unit),
                  min_sustained.source};
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
  Check loss{"burnin", "loss_max_rel_error", "", "<=", worst, tolerance.value, worst <= tolerance.value,
             fmt::format("{} rounds against {}; worst: round {} iteration {}, loss {}, golden {}; {} of {} later "
                         "rounds repeated round 1's losses bit for bit",
                         rounds.size(), golden_name, worst_round + 1, worst_it + 1,
                         have ? fmt::format("{:.7f}", rounds[worst_round].losses[worst_it]) : std::string("missing"),
                         worst_it < golden.size() ? fmt::format("{:.7f}", golden[worst_it]) : std::string("-"),
                         repeated, rounds.empty() ? 0 : rounds.size() - 1),
             tolerance.source};
  return {sustained, loss};
}

}  // namespace ptdp
