#include "experiments/accept_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/results/distinct_outputs.h"
#include "core/results/output_files.h"
#include "experiments/accept_fleet.h"

namespace ptdp {

namespace {

namespace fs = std::filesystem;

// The JSON report (nlohmann::json): the run's provenance, then one object per check; a skipped
// check's value is null.
std::string report_json(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv, int threads,
                        bool quick, bool passed) {
  using nlohmann::ordered_json;
  ordered_json j = {{"profile", p.name},
                    {"profile_path", p.path},
                    {"profile_device", p.device},
                    {"profile_cpu_model", p.cpu_model},
                    {"git_sha", pv.git_sha},
                    {"host", pv.host},
                    {"device", pv.device},
                    {"cpu", pv.cpu},
                    {"software", pv.software},
                    {"timestamp", pv.timestamp},
                    {"threads", threads},
                    {"ranks", p.ranks},
                    {"quick", quick},
                    {"passed", passed},
                    {"checks", ordered_json::array()}};
  for (const Check& c : checks) j["checks"].push_back(check_json(c));
  return j.dump(2) + "\n";
}
constexpr char kNodeCsvHeader[] =
    "check,metric,value,unit,op,threshold,status,detail,threshold_source,profile,git_sha,host,device,timestamp";

std::string report_csv(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv) {
  std::string s = kNodeCsvHeader;
  s += '\n';
  for (const Check& c : checks) {
    std::vector<std::string> f = check_csv_fields(c);
    f.insert(f.end(), {c.detail, c.source, p.name, pv.git_sha, pv.host, pv.device, pv.timestamp});
    s += csv_row(f);
  }
  return s;
}

}  // namespace

std::pair<std::string, std::string> report_paths(const std::string& out) {
  const fs::path p(out);
  if (p.extension() == ".csv")
    usage_error("--out {}: names the JSON report (the CSV report goes beside it, with the extension .csv); "
                "use a .json name",
                out);
  check_output_file(out, "--out");
  fs::path csv = p;
  csv.replace_extension(".csv");
  check_output_file(csv.string(), "--out (its CSV report)");
  check_distinct_outputs({{"--out", p.string()}, {"--out's CSV report", csv.string()}});
  // The CSV report is not the file named: an existing one is replaced only if it is a report.
  std::ifstream existing(csv);
  std::string first;
  if (existing && std::getline(existing, first) && first != kNodeCsvHeader && first != kFleetCsvHeader)
    usage_error("--out {}: its CSV report {} exists and is not a report of ptdp accept (its first line is '{}'); "
                "move it or name another --out",
                out, csv.string(), first.substr(0, 80));
  return {p.string(), csv.string()};
}

int fleet_report(Communicator& world, const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv,
                 const std::pair<std::string, std::string>& out, int gpu) {
  FleetMember me{fleet_node_name(), pv.device, world.rank(), checks, gpu};
  const std::vector<FleetMember> members = gather_fleet(world, me);
  Tensor code = Tensor::zeros({1}, DType::F32);
  if (world.rank() == 0) {
    const FleetVerdict v = judge_fleet(members, p.fleet_min_spread.value);
    print_fleet(v);
    if (!out.first.empty()) {
      write_user_file(out.first, fleet_json(members, v, p.name, pv.git_sha, pv.timestamp));
      write_user_file(out.second, fleet_csv(v, p.name, pv.git_sha, pv.timestamp));
      fmt::print("reports: {} and {}\n", out.first, out.second);
    }
    size_t failed = 0, slow = 0;
    for (const FleetRow& r : v.rows) {
      failed += !r.failed.empty();
      slow += r.failed.empty() && !r.outliers.empty();
    }
    if (v.passed) fmt::print("ACCEPT: PASS (fleet of {} processes)\n", v.rows.size());
    else
      fmt::print("ACCEPT: FAIL (fleet of {} processes: {} failed, {} outlier(s); exclude {} node(s))\n", v.rows.size(),
                 failed, slow, v.exclude.size());
    code.data<float>()[0] = v.passed ? 0.0f : 1.0f;
  }
  world.broadcast(code, 0);
  return int(code.data<float>()[0]);
}

int node_report(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv,
                const std::pair<std::string, std::string>& out, const ReportRun& run) {
  bool passed = true;  // every check that ran passed (SKIP neither passes nor fails)
  std::string failed, skipped;
  size_t ran = 0, n_failed = 0;
  fmt::print("{:<10} {:<20} {:>12} {:<8} {:>2} {:>10}  {:<6} {}\n", "check", "metric", "measured", "unit", "",
             "threshold", "result", "detail");
  for (const Check& c : checks) {
    const std::string measured = c.skipped ? "-" : fmt::format("{:.4g}", c.value);
    fmt::print("{:<10} {:<20} {:>12} {:<8} {:>2} {:>10.4g}  {:<6} {}\n", c.name, c.metric, measured, c.unit, c.op,
               c.threshold, c.status(), c.detail);
    if (c.skipped) {
      skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", c.name);
      continue;
    }
    ++ran;
    if (!c.pass) {
      passed = false;
      ++n_failed;
    }
  }
  failed = failed_checks_text(checks);
  const size_t n_skipped = checks.size() - ran;
  if (ran == 0) passed = false;  // nothing measured is not a pass
  const std::string skip_note = n_skipped ? fmt::format("; {} skipped: {}", n_skipped, skipped) : "";
  if (!out.first.empty()) {
    write_user_file(out.first, report_json(p, checks, pv, run.threads, run.quick, passed));
    write_user_file(out.second, report_csv(p, checks, pv));
    fmt::print("reports: {} and {}\n", out.first, out.second);
  }
  if (ran == 0) fmt::print("ACCEPT: FAIL (no check ran{})\n", skip_note);
  else if (passed) fmt::print("ACCEPT: PASS ({} of {} checks{})\n", ran, ran, skip_note);
  else if (const std::string loaded = failed_under_load_text(checks); !loaded.empty())
    fmt::print("ACCEPT: FAIL ({} failed: {}{}; measured under load: {}, which may be the load's doing, not the "
               "machine's: rerun on a quiet machine)\n",
               n_failed, failed, skip_note, loaded);
  else fmt::print("ACCEPT: FAIL ({} failed: {}{})\n", n_failed, failed, skip_note);
  return passed ? 0 : 1;
}

ScopedQuietStdout::ScopedQuietStdout() {
  std::fflush(stdout);
  saved_ = ::dup(1);
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) {
    ::dup2(null, 1);
    ::close(null);
  }
}

ScopedQuietStdout::~ScopedQuietStdout() {
  std::fflush(stdout);
  if (saved_ >= 0) {
    ::dup2(saved_, 1);
    ::close(saved_);
  }
}

}  // namespace ptdp
