// What `ptdp accept` shares between its CPU checks (cmd_accept.cpp) and its GPU checks
// (accept_gpu.cpp): the acceptance profile as read from hardware/NAME-accept.toml, the rates of
// repeated measurements, and one check's result (PASS, FAIL or SKIP) as the report shows it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ptdp {

struct Threshold {
  double value = 0;
  std::string source;
};

struct AcceptProfile {
  std::string path, name, device, kind;  // kind: "cpu" or "gpu"
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

struct Samples {
  std::vector<double> rates;  // one per repetition
  double best() const { return *std::max_element(rates.begin(), rates.end()); }
  double median() const {
    std::vector<double> v = rates;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
};

struct Check {
  std::string name, metric, unit, op;  // op: ">=" (at least) or "<=" (at most)
  double value = 0, threshold = 0;
  bool pass = false;
  std::string detail, source;
  bool skipped = false;  // not measurable on this machine (the detail says why); neither passes nor fails

  const char* status() const { return skipped ? "SKIP" : pass ? "PASS" : "FAIL"; }
};

// A check that cannot run here: value NaN, status SKIP, `why` as its detail.
inline Check skipped_check(std::string name, std::string metric, std::string unit, const Threshold& t,
                           std::string why) {
  Check c{std::move(name), std::move(metric), std::move(unit), ">=", std::numeric_limits<double>::quiet_NaN(),
          t.value, false, std::move(why), t.source};
  c.skipped = true;
  return c;
}

// The checks that ran and failed, each named once, with its failed metrics where more than one
// failed: "gemm, burnin (gemm_sustained, clock_faults)".
std::string failed_checks_text(const std::vector<Check>& checks);

// One check as the reports write it (accept_check.cpp), for one node's report and a fleet's:
// a JSON object (a value or threshold that is not finite is null) and back, and the CSV fields
// check, metric, value, unit, op, threshold, status (a skipped check's value empty).
nlohmann::ordered_json check_json(const Check& c);
Check check_from_json(const nlohmann::ordered_json& j);
std::vector<std::string> check_csv_fields(const Check& c);

// A CSV field, quoted where it holds a comma, a quote or a line break.
inline std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string r = "\"";
  for (char c : v) r += c == '"' ? std::string("\"\"") : std::string(1, c);
  return r + "\"";
}

// One CSV line of these fields.
inline std::string csv_row(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? "," : "") + csv_field(fields[i]);
  return s + "\n";
}

}  // namespace ptdp
