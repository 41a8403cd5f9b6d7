// The outcome of `ptdp compare` as data, and its renderings: the console text, JSON, Markdown
// (a pull-request comment) and JUnit XML (CI test reports).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptdp {

// Exit codes of `ptdp compare` (2 is bad input, as everywhere).
inline constexpr int kComparePass = 0, kCompareFail = 1, kCompareInconclusive = 3;

// One metric of one configuration.
struct MetricOutcome {
  std::string name;                   // tflops_per_gpu, tokens_per_s, peak_mem_gb
  std::optional<double> base, cur;    // medians; empty when the side has no value
  // "ok", "REGRESSION", "INCONCLUSIVE", "EMPTY" (the current file has none), "not compared".
  std::string verdict;
  std::string detail;                 // the console's delta text and reason
  std::optional<double> delta_pct, lo_pct, hi_pct, p;  // the estimate, its interval, the U test
  size_t n_base = 0, n_cur = 0;
  std::optional<long> runs_to_decide;  // INCONCLUSIVE: about how many runs a side would decide it
};

// One configuration: compared, missing from the current file, or new in it.
struct ConfigOutcome {
  // The configuration: each key column's value (config_key_columns()), then the machine's columns
  // (host, device) when the key holds them (--per-machine).
  std::vector<std::pair<std::string, std::string>> key, machine;
  std::string label;
  std::string verdict;  // "ok", "REGRESSION", "INCONCLUSIVE", "MISSING", "NEW", "not compared" (no baseline value)
  std::string base_lines, cur_lines;
  std::string note;     // machines differ, ...
  std::vector<MetricOutcome> metrics;
};

// One metric's change over every configuration compared: the geometric mean of the ratios of the
// current to the baseline medians (Google Benchmark's OVERALL_GEOMEAN), over the configurations
// with both medians positive.
struct OverallGeomean {
  std::string metric;
  std::optional<double> ratio;  // empty when no configuration had both
  int configurations = 0;
  std::string text() const;  // "-1.23% over 2 configurations", or "not compared"
};

struct CompareOutcome {
  std::string baseline, current;
  double tolerance = 0, alpha = 0;
  bool per_machine = false;
  std::string timestamp;  // when the comparison ran, UTC: 2026-12-06T23:40:00
  std::string hostname;   // where it ran
  double seconds = 0;     // how long it took
  std::vector<ConfigOutcome> configs;
  std::vector<OverallGeomean> overall_geomean;  // per metric
  std::vector<std::string> failures;  // one line each: what failed and why
  int exit_code() const;
  std::string verdict() const;        // PASS, FAIL, INCONCLUSIVE
};

// --format json | markdown | junit (the console text is printed as the comparison runs).
std::string render_json(const CompareOutcome& o);
std::string render_markdown(const CompareOutcome& o);
std::string render_junit(const CompareOutcome& o);

}  // namespace ptdp
