// The burn-in of `ptdp accept --level 3` (dcgmi diag -r 3's long run): the GEMM and the golden
// training run repeated for --burn-in-seconds, so that what only shows under sustained load is
// seen: clocks that drop as the GPU (or CPU) heats up, and results that go wrong after a while.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "experiments/accept_check.h"

namespace ptdp {

// One round: when it ended (seconds since the burn-in started), its GEMM rate (the slowest GPU's)
// and the golden run's losses.
struct BurnInRound {
  double seconds = 0;
  double gemm_rate = 0;
  std::vector<double> losses;
};

// Runs rounds of `gemm` (a rate) then `train` (losses) until `seconds` have passed, at least two
// rounds; prints a progress line per round (`unit`: the GEMM rate's).
std::vector<BurnInRound> run_burnin(double seconds, const std::string& unit, const std::function<double()>& gemm,
                                    const std::function<std::vector<double>()>& train);

// Two checks (name "burnin"):
// - gemm_sustained: the slowest round's GEMM rate over the fastest's, at least `min_sustained`
//   (accept.burnin.min_sustained); the detail names the slowest round and when it ran;
// - loss_max_rel_error: the worst relative distance of any round's losses from `golden`, at most
//   `tolerance` (the train check's); the detail names the round and iteration, and how many
//   rounds repeated the first round's losses bit for bit.
std::vector<Check> burnin_checks(const std::vector<BurnInRound>& rounds, const std::string& unit,
                                 const std::vector<double>& golden, const std::string& golden_name,
                                 const Threshold& min_sustained, const Threshold& tolerance);

}  // namespace ptdp
