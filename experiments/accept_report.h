// The reports of `ptdp accept`: the table of checks and the verdict line on standard output, the
// JSON and CSV reports (--out), and a fleet's report gathered on rank 0 (accept_fleet.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/results/provenance.h"
#include "experiments/accept_profile.h"

namespace ptdp {

struct Provenance {
  std::string git_sha = ptdp::git_sha(), host = host_name(), device = cpu_name(), timestamp = utc_timestamp();
  std::string cpu = cpu_name();
  std::string software;  // GPU profiles: the CUDA runtime, driver and NCCL versions
};

// --out FILE: the JSON report is FILE, the CSV report FILE with the extension .csv; both checked
// as output files (UsageError naming --out).
std::pair<std::string, std::string> report_paths(const std::string& out);

// The options of the run that the JSON report records.
struct ReportRun {
  int threads = 0;
  bool quick = false;
};

// One node's end: the table of `checks`, the reports at `out` (when given) and the verdict line;
// returns the exit code, 0 when every check that ran passed and one did, else 1.
int node_report(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv,
                const std::pair<std::string, std::string>& out, const ReportRun& run);

// A fleet's end: every process's checks gathered on rank 0, which prints the fleet's table and
// writes the fleet report (--out); every process returns the fleet's exit code. `gpu`: the one
// GPU this process checked, or -1.
int fleet_report(Communicator& world, const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv,
                 const std::pair<std::string, std::string>& out, int gpu);

// Standard output to /dev/null while alive (a fleet's processes other than rank 0).
class ScopedQuietStdout {
 public:
  ScopedQuietStdout();
  ~ScopedQuietStdout();
  ScopedQuietStdout(const ScopedQuietStdout&) = delete;
  ScopedQuietStdout& operator=(const ScopedQuietStdout&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace ptdp
