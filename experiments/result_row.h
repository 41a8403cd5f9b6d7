// The contract's result row (docs/RESULTS.md) of one configuration, shared by the subcommands
// that write one: the configuration columns and the throughput derived from an iteration time.
#pragma once
#include <string>

#include "core/config/results_csv.h"
#include "core/config/run_config.h"
#include "core/sim/hardware.h"
#include "core/sim/simulator.h"

namespace ptdp {

// Fills the configuration's columns (config_row: every field's, mode, params, gpus, ...),
// iter_time_ms, tflops_per_gpu (Eq. 3), model_tflops_per_gpu, tokens_per_s, seq_per_s, git_sha,
// host, timestamp, and pct_peak when `peak_flops` (per device) is positive. The caller sets
// bubble_fraction, peak_mem_gb, loss and device.
ResultRow make_result_row(const RunConfig& c, const std::string& mode, double iter_ms, double peak_flops = 0);

// The row of a simulated configuration: mode=simulate, backend = the profile's name, device = its
// device, comm = nccl on GPU profiles, iters = 1, no loss; the breakdown columns (fwd_ms ...
// activation_gb) are the first stage's, as `ptdp train` reports rank 0's.
ResultRow make_simulated_row(const RunConfig& c, const sim::HardwareProfile& hw, const sim::SimResult& r);
// The columns every simulated row shares (make_result_row's, then backend = the profile's name,
// comm = nccl on GPU profiles, iters = 1), with the profile's peak for pct_peak.
ResultRow make_profile_row(const RunConfig& c, const sim::HardwareProfile& hw, double iter_ms);

}  // namespace ptdp
