// One check of `ptdp accept` as its reports show it: what was measured, against which threshold
// (with its source), PASS, FAIL or SKIP; as a JSON object and as CSV fields.
#pragma once
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

struct Check {
  std::string name, metric, unit, op;  // op: ">=" (at least) or "<=" (at most)
  double value = 0, threshold = 0;
  bool pass = false;
  std::string detail, source;
  bool skipped = false;  // not measurable on this machine (the detail says why); neither passes nor fails
  bool under_load = false;  // measured while other work competed for the CPUs (accept_load.h; the detail says how)

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

// The checks that failed while measured under load, each named once: "gemm, memory".
std::string failed_under_load_text(const std::vector<Check>& checks);

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
