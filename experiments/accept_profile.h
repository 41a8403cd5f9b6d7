// The acceptance profile of `ptdp accept`: hardware/NAME-accept.toml (docs/ACCEPTANCE.md, "The
// acceptance profile") read in full and checked, each threshold with its source.
#pragma once
#include <cstdint>
#include <string>

#include "experiments/accept_check.h"

namespace ptdp {

struct AcceptProfile {
  std::string path, name, device, kind;  // kind: "cpu" or "gpu"
  // The CPU the thresholds were measured on, as /proc/cpuinfo names it (cpu_model; optional): a run
  // on another CPU is warned that they may not fit it.
  std::string cpu_model;
  int ranks = 2;                         // cpu: ranks of one node for the communication checks
  int node_gpus = 0;                     // gpu: GPUs of one node (informational: every visible GPU is used)
  int node_nics = 0;                     // compute-fabric NICs of one node (node.nics; 0: not given)
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  std::string gemm_what;
  Threshold min_gemm_gflops;             // cpu: OpenBLAS sgemm, GFLOP/s
  Threshold min_gemm_tflops;             // gpu: bf16 GEMM, TFLOP/s
  int64_t triad_mib = 0;                 // size of each array of the memory check
  Threshold min_triad_gbs;               // cpu: STREAM triad
  Threshold min_memory_gbs;              // gpu: STREAM add kernel in device memory
  int64_t allreduce_mib = 0;
  Threshold min_allreduce_busbw_gbs;
  int64_t p2p_mib = 0;
  Threshold min_p2p_gbs;
  std::string golden;                    // as written in the profile
  std::string golden_path;               // resolved
  Threshold max_loss_rel_error;
  std::string cpu_golden, cpu_golden_path;  // gpu: the CPU golden file, used while `golden` does not exist
  Threshold max_loss_rel_error_vs_cpu;
  // [accept.fleet], for a job over several nodes (accept_fleet.h): all optional; a threshold of 0
  // leaves the metric to the fleet's median.
  int64_t internode_mib = 0;             // default: accept.allreduce.mib
  Threshold min_internode_allreduce_busbw_gbs;
  // Or per NIC: the all-reduce's threshold is this x the NICs a node's processes can drive, min(its
  // processes, node.nics) on the node with the fewest (a ring of k GPUs a node, each on its own
  // NIC, moves k NICs' worth between nodes).
  Threshold min_internode_allreduce_busbw_gbs_per_nic;
  Threshold min_internode_p2p_gbs;
  // The least spread an outlier must exceed, as a fraction of the fleet's median: this machine
  // kind's run-to-run noise (default 0.05).
  Threshold fleet_min_spread{0.05, "ptdp's default: 5% of the median"};
  // [accept.health] (optional): the most 1-minute load average per online CPU before the run.
  // [accept.burnin] (optional): how long `--level 3`'s burn-in runs, how long each round's GEMM
  // load lasts, and the least ratio of its slowest GEMM round to its fastest.
  double burnin_seconds = 600;
  double burnin_round_seconds = 10;
  Threshold burnin_min_sustained{0.9, "ptdp's default: a part that loses more than 10% of its GEMM rate under "
                                      "sustained load is throttling (clocks held down by heat or power)"};
  Threshold max_load_per_cpu{0.5, "ptdp's default: at most half the CPUs busy with other work before the run"};
};

// --hardware NAME looks up NAME-accept.toml in the hardware folders; a path is read as it is.
// Every rule a field breaks is a UsageError naming the file and the field.
AcceptProfile load_accept_profile(const std::string& name_or_path);

// A relative path in the profile: from the current directory if it is there, else from the source tree.
std::string resolve_data_path(const std::string& p);

}  // namespace ptdp
