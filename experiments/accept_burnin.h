// The burn-in of `ptdp accept --level 3` (dcgmi diag -r 3's long run): rounds of the GEMM run
// back to back on every GPU at once, each followed by the golden training run, for
// --burn-in-seconds, so that what only shows under sustained load is seen: clocks that drop as
// the GPUs heat up or hit a power brake, and results that go wrong after a while.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "experiments/accept_check.h"
#include "experiments/accept_health.h"

namespace ptdp {

// One round: when it ended (seconds since the burn-in started), the GEMM's sustained rate over
// the round's load (the slowest GPU's), the golden run's losses, the GEMM entries checked against
// the host and how many were wrong, and what NVML read while the load ran (empty: no NVML).
struct BurnInRound {
  double seconds = 0;
  double gemm_rate = 0;
  std::vector<double> losses;
  int64_t gemm_checked = 0, gemm_wrong = 0;
  std::vector<GpuHealth> sensors;
};

// The GEMM load of one round: runs for about `seconds` and fills gemm_rate, gemm_checked,
// gemm_wrong and sensors.
using BurnInLoad = std::function<void(double seconds, BurnInRound& round)>;

// Runs rounds of `load` (each `round_seconds`, the last one shorter so as to end on time) then
// `train` (losses) until `seconds` have passed, at least two rounds; prints a progress line per
// round (`unit`: the GEMM rate's).
std::vector<BurnInRound> run_burnin(double seconds, double round_seconds, const std::string& unit,
                                    const BurnInLoad& load, const std::function<std::vector<double>()>& train);

// What a round's sensors read, e.g. "690 W, 61 C, SM 1980 MHz" (one GPU) or "655-690 W,
// 55-61 C, SM 1755-1980 MHz over 8 GPUs", with any GPU whose clocks are held down; empty without sensors.
std::string sensor_summary(const std::vector<GpuHealth>& sensors);

// Three checks (name "burnin"):
// - gemm_sustained: the slowest round's GEMM rate over the fastest's, at least `min_sustained`
//   (accept.burnin.min_sustained), and no sampled GEMM entry wrong; the detail names the slowest
//   round and when it ran;
// - loss_max_rel_error: the worst relative distance of any round's losses from `golden`, at most
//   `tolerance` (the train check's); the detail names the round and iteration, and how many
//   rounds repeated the first round's losses bit for bit;
// - clock_faults: the rounds in which a GPU's clocks were held down under load (HW slowdown,
//   thermal, power brake), at most 0; the detail names the first and the hottest reading. SKIP
//   when no round has sensors (no NVML: the CPU, the virtual GPU).
std::vector<Check> burnin_checks(const std::vector<BurnInRound>& rounds, const std::string& unit,
                                 const std::vector<double>& golden, const std::string& golden_name,
                                 const Threshold& min_sustained, const Threshold& tolerance);

}  // namespace ptdp
