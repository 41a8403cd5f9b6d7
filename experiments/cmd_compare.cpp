// `ptdp compare BASELINE.csv CURRENT.csv [--tolerance PCT] [--alpha A] [--per-machine]`: the
// throughput regression check. Rows of the two result CSVs are matched by their configuration key
// (with --per-machine, by configuration and machine: host and device); rows that repeat a key are
// repeated samples of it (several runs, each the median over its timed iterations), and a note
// names the machines when the two sides were measured on different ones. For each configuration
// the throughput (tflops_per_gpu, tokens_per_s) and memory (peak_mem_gb) changes are printed: with
// enough samples on both sides as the Hodges-Lehmann estimate with its confidence interval and a
// Mann-Whitney U test, and a change is a regression only when it is beyond PCT percent AND
// significant at level A; with too few samples for the test, by the tolerance alone on the medians.
// Exit code 1 on a regression or a baseline configuration missing from CURRENT; 3 (INCONCLUSIVE)
// when an interval reaches beyond the tolerance on the bad side without a regression shown (the
// output says about how many runs a side would decide it); 0 (PASS) only when every interval
// stays inside the tolerance; 2 on bad input. --format json|markdown|junit prints the same
// outcome for machines (compare_report.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/common/error.h"
#include "core/results/csv_reader.h"
#include "core/results/provenance.h"
#include "core/config/results_csv.h"
#include "experiments/compare_labels.h"
#include "experiments/compare_report.h"
#include "experiments/stats.h"

namespace ptdp {

namespace {

// The configuration key: what identifies one measured configuration (docs/ACCEPTANCE.md), the
// same columns `ptdp reproduce` keeps one row per (results_csv.h: config_key_columns).
const std::vector<std::string>& key_columns() { return config_key_columns(); }

struct Metric {
  const char* column;
  bool higher_is_better;  // throughput: a drop is a regression; memory: a rise is
};
const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {{"tflops_per_gpu", true}, {"tokens_per_s", true}, {"peak_mem_gb", false}};
  return m;
}

// The timings of a row: not compared, but read to refuse a row whose timing is not a finite
// number (inf from a division by a zero time), as its metrics are refused.
const std::vector<std::string>& timing_columns() {
  static const std::vector<std::string> t = {"iter_time_ms", "fwd_ms",       "bwd_ms",       "p2p_wait_ms",
                                             "dp_ms",        "optimizer_ms", "layer_fwd_ms", "layer_bwd_ms"};
  return t;
}

void check_timings(const std::string& path) {
  std::map<std::string, std::string> absent;  // a file written before a timing column existed
  for (const auto& c : timing_columns()) absent[c] = "";
  const CsvTable t = CsvTable::read(path, timing_columns(), /*lock=*/true, absent);
  for (size_t i = 0; i < t.size(); ++i)
    for (const auto& c : timing_columns()) t.number_or_empty(i, c);  // "FILE:LINE: column 'C': 'inf' is not a finite number"
}

// The machine a row was measured on: its host and device columns.
const std::vector<std::string>& machine_columns() {
  static const std::vector<std::string> m = {"host", "device"};
  return m;
}

// A key's columns by name: the configuration's, and the machine's when the key holds them.
void name_key(const std::vector<std::string>& key, ConfigOutcome& co) {
  const auto& cols = key_columns();
  for (size_t i = 0; i < cols.size(); ++i) co.key.emplace_back(cols[i], key[i]);
  for (size_t i = cols.size(); i < key.size(); ++i) co.machine.emplace_back(machine_columns()[i - cols.size()], key[i]);
}

// Relative change of cur against base, in percent (+inf/-inf when the baseline is 0).
double delta_pct(double base, double cur) {
  if (base == 0) return cur == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), cur);
  return 100.0 * (cur - base) / std::fabs(base);
}

struct Entry {
  std::vector<int> lines;
  std::vector<std::string> key;
  std::vector<std::vector<double>> samples;  // per metric, one value per row (empty fields skipped)
  std::vector<std::string> machines;         // "host/device" of its rows, each once, first-seen order
};

struct ResultSet {
  std::string path;
  std::vector<std::vector<std::string>> order;  // keys in first-seen order
  std::map<std::vector<std::string>, Entry> by_key;
};

ResultSet load(const std::string& path, bool per_machine) {
  std::vector<std::string> cols = key_columns();
  for (const auto& m : metrics()) cols.push_back(m.column);
  for (const auto& m : machine_columns()) cols.push_back(m);
  const CsvTable t = CsvTable::read(path, cols, /*lock=*/true, config_key_defaults());
  check_timings(path);
  ResultSet rs;
  rs.path = path;
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<std::string> key;
    for (const auto& k : key_columns()) key.push_back(config_key_value(k, t.text(i, k)));
    if (per_machine)
      for (const auto& m : machine_columns()) key.push_back(t.text(i, m));
    auto it = rs.by_key.find(key);
    if (it == rs.by_key.end()) {
      rs.order.push_back(key);
      it = rs.by_key.emplace(key, Entry{{}, key, std::vector<std::vector<double>>(metrics().size()), {}}).first;
    }
    Entry& e = it->second;
    e.lines.push_back(t.line(i));
    const std::string machine = fmt::format("{}/{}", t.text(i, "host"), t.text(i, "device"));
    if (std::find(e.machines.begin(), e.machines.end(), machine) == e.machines.end()) e.machines.push_back(machine);
    for (size_t m = 0; m < metrics().size(); ++m)
      if (auto v = t.number_or_empty(i, metrics()[m].column)) e.samples[m].push_back(*v);
  }
  return rs;
}

// A baseline without rows, or without any metric value, leaves nothing to compare: refused, since
// a comparison of nothing cannot pass.
void check_something_to_compare(const ResultSet& base) {
  if (base.order.empty()) usage_error("{}: no result rows (only a header): nothing to compare against", base.path);
  for (const auto& [key, e] : base.by_key)
    for (const auto& s : e.samples)
      if (!s.empty()) return;
  std::vector<std::string> names;
  for (const auto& m : metrics()) names.push_back(m.column);
  usage_error("{}: no row has a value of {}: nothing to compare against", base.path, fmt::join(names, ", "));
}

std::string lines_text(const std::vector<int>& lines) {
  return lines.size() == 1 ? fmt::format("line {}", lines[0])
                           : fmt::format("lines {}", fmt::join(lines, ","));
}

// The smallest two-sided p-value a U test of m against n samples can give (all of one sample
// above all of the other): 2 / C(m+n, m).
double smallest_p(size_t m, size_t n) {
  double c = 1;
  for (size_t i = 1; i <= m; ++i) c = c * double(n + i) / double(i);
  return std::min(1.0, 2 / c);
}

// About how many runs a side would make the interval decide: its half-width shrinks as
// sqrt(1/m + 1/n); it must shrink from `width` (estimate to the bad-side end) to `room` (estimate
// to the line that decides: the tolerance, or 0 for a change beyond it).
long runs_to_decide(double width, double room, size_t m, size_t n) {
  constexpr long kMost = 100000;
  if (!(room > 0) || !(width > 0)) return kMost;
  const double shrink = room / width;
  const double runs = 2.0 / ((1.0 / double(m) + 1.0 / double(n)) * shrink * shrink);
  return long(std::min<double>(kMost, std::max<double>(double(std::max(m, n)) + 1, std::ceil(runs))));
}

MetricOutcome judge(const Metric& mt, const std::vector<double>& b, const std::vector<double>& c, double tol,
                    double alpha) {
  MetricOutcome v;
  v.name = mt.column;
  v.n_base = b.size();
  v.n_cur = c.size();
  if (!b.empty()) v.base = median(b);
  if (!c.empty()) v.cur = median(c);
  v.verdict = "not compared";
  v.detail = "-";
  if (b.empty()) {
    if (!c.empty()) v.detail = "no baseline value";
    return v;
  }
  if (c.empty()) {  // the baseline measured it, the current run did not: never a pass
    v.verdict = "EMPTY";
    v.detail = fmt::format("the current file has no value ({} in the baseline)", b.size());
    return v;
  }
  const bool worse_is_lower = mt.higher_is_better;
  const bool positive = *std::min_element(b.begin(), b.end()) > 0 && *std::min_element(c.begin(), c.end()) > 0;
  if (positive && smallest_p(b.size(), c.size()) < alpha) {
    const RelativeChange ch = relative_change(b, c, 1 - alpha);
    const UTest u = mann_whitney(c, b);
    const double d = 100 * ch.estimate, lo = 100 * ch.lo, hi = 100 * ch.hi;
    v.delta_pct = d, v.lo_pct = lo, v.hi_pct = hi, v.p = u.p;
    const bool beyond = worse_is_lower ? d < -tol : d > tol;
    const bool significant = u.p < alpha;
    // PASS needs the whole interval inside the tolerance on the bad side; a regression needs the
    // change beyond it and significant; anything between cannot be told from the noise yet.
    const bool reaches = worse_is_lower ? lo < -tol : hi > tol;
    v.detail = fmt::format("{:+.2f}% [{:+.2f}%, {:+.2f}%] p={:.3g} n={}/{}", d, lo, hi, u.p, b.size(), c.size());
    if (beyond && significant) {
      v.verdict = "REGRESSION";
    } else if (reaches) {
      v.verdict = "INCONCLUSIVE";
      const double width = std::fabs(d - (worse_is_lower ? lo : hi));
      const double room = beyond ? std::fabs(d) : (worse_is_lower ? d + tol : tol - d);
      v.runs_to_decide = runs_to_decide(width, room, b.size(), c.size());
    } else {
      v.verdict = "ok";
    }
    return v;
  }
  const double d = delta_pct(median(b), median(c));
  const bool beyond = worse_is_lower ? d < -tol : d > tol;
  const bool single = b.size() == 1 && c.size() == 1;
  v.delta_pct = d;
  v.verdict = beyond ? "REGRESSION" : "ok";
  v.detail = std::isfinite(d) ? fmt::format("{:+.2f}%", d) : (d > 0 ? "+inf%" : "-inf%");
  if (!single) v.detail += fmt::format(" n={}/{}", b.size(), c.size());
  return v;
}

// Per metric, the geometric mean of the current/baseline ratios of the configurations compared
// (Google Benchmark's OVERALL_GEOMEAN): those with both medians positive.
std::vector<OverallGeomean> overall_geomean(const std::vector<ConfigOutcome>& configs) {
  std::vector<OverallGeomean> out;
  for (size_t m = 0; m < metrics().size(); ++m) {
    OverallGeomean g;
    g.metric = metrics()[m].column;
    double log_sum = 0;
    for (const auto& c : configs) {
      if (c.metrics.size() <= m) continue;  // missing from the current file
      const MetricOutcome& v = c.metrics[m];
      if (v.base && v.cur && *v.base > 0 && *v.cur > 0) {
        log_sum += std::log(*v.cur / *v.base);
        ++g.configurations;
      }
    }
    if (g.configurations > 0) g.ratio = std::exp(log_sum / g.configurations);
    out.push_back(std::move(g));
  }
  return out;
}

// The console's status text of a judged metric.
std::string status_text(const MetricOutcome& v, double tol, double alpha) {
  if (v.verdict == "not compared") return v.detail == "-" ? "not compared (empty)" : "not compared (no baseline value)";
  if (v.verdict == "EMPTY") return "EMPTY: " + v.detail;
  if (v.verdict == "INCONCLUSIVE")
    return fmt::format("INCONCLUSIVE (the interval reaches beyond {}%{}; about {} runs a side would decide it)", tol,
                       v.p && *v.p >= alpha ? fmt::format(", not significant at {}", alpha) : "", *v.runs_to_decide);
  if (v.verdict == "REGRESSION" && !v.p && (v.n_base > 1 || v.n_cur > 1))
    return "REGRESSION (tolerance only: too few samples for a significance test)";
  return v.verdict;
}

CompareOutcome compare(const std::string& base_path, const std::string& cur_path, double tol, double alpha,
                       bool per_machine, bool print) {
  const auto start = std::chrono::steady_clock::now();
  const ResultSet base = load(base_path, per_machine);
  const ResultSet cur = load(cur_path, per_machine);
  check_something_to_compare(base);
  std::vector<std::vector<std::string>> all_keys = base.order;
  all_keys.insert(all_keys.end(), cur.order.begin(), cur.order.end());
  const ConfigLabels label(all_keys);
  auto say = [&](const std::string& text) {
    if (print) fmt::print("{}", text);
  };
  CompareOutcome o;
  o.baseline = base_path, o.current = cur_path, o.tolerance = tol, o.alpha = alpha, o.per_machine = per_machine;
  o.timestamp = utc_timestamp();  // JUnit's timestamp has no zone: 2026-12-06T23:40:00
  if (!o.timestamp.empty() && o.timestamp.back() == 'Z') o.timestamp.pop_back();
  o.hostname = host_name();
  say(fmt::format("ptdp compare: baseline {} ({} configurations), current {} ({} configurations), tolerance {}%, "
                  "significance level {}{}\n",
                  base_path, base.order.size(), cur_path, cur.order.size(), tol, alpha,
                  per_machine ? ", each machine (host/device) on its own" : ""));

  bool single_runs = false;
  for (const auto& key : base.order)
    if (auto it = cur.by_key.find(key); it != cur.by_key.end())
      single_runs = single_runs || base.by_key.at(key).lines.size() == 1 || it->second.lines.size() == 1;
  if (single_runs)
    say("note: configurations with one run on a side are judged by the tolerance alone; repeated runs (rows) of a "
        "configuration on both sides get a significance test\n");

  int regressions = 0, inconclusive = 0, missing = 0, ok = 0, not_compared = 0;
  for (const auto& key : base.order) {
    const Entry& b = base.by_key.at(key);
    ConfigOutcome co;
    co.label = label(key);
    name_key(key, co);
    co.base_lines = lines_text(b.lines);
    say(co.label + "\n");
    auto it = cur.by_key.find(key);
    if (it == cur.by_key.end()) {
      say(fmt::format("  MISSING from {} (baseline {})\n", cur_path, co.base_lines));
      o.failures.push_back(fmt::format("missing: {} (baseline {})", co.label, co.base_lines));
      co.verdict = "MISSING";
      o.configs.push_back(co);
      ++missing;
      continue;
    }
    const Entry& c = it->second;
    co.cur_lines = lines_text(c.lines);
    if (b.machines != c.machines || b.machines.size() > 1) {
      co.note = fmt::format("baseline measured on {}, current on {}: the change includes the difference between "
                            "machines (--per-machine compares each machine with itself)",
                            fmt::join(b.machines, ", "), fmt::join(c.machines, ", "));
      say("  note: " + co.note + "\n");
    }
    bool bad = false, unsure = false, judged = false;
    for (size_t m = 0; m < metrics().size(); ++m) {
      const Metric& mt = metrics()[m];
      MetricOutcome v = judge(mt, b.samples[m], c.samples[m], tol, alpha);
      const std::string bv = v.base ? fmt::format("{:.4g}", *v.base) : "-";
      const std::string cv = v.cur ? fmt::format("{:.4g}", *v.cur) : "-";
      const std::string status = status_text(v, tol, alpha);
      if (v.verdict == "REGRESSION" || v.verdict == "EMPTY") {
        bad = true;
        const std::string why = v.verdict == "EMPTY" ? status : fmt::format("{}, beyond {}%", v.detail, tol);
        o.failures.push_back(fmt::format("{}: {} {} -> {} ({}) (baseline {}, current {})", co.label, mt.column, bv, cv,
                                         why, co.base_lines, co.cur_lines));
      }
      unsure = unsure || v.verdict == "INCONCLUSIVE";
      judged = judged || v.verdict != "not compared";
      say(fmt::format("  {:<15} {:>12} -> {:>12}  {}  {}\n", mt.column, bv, cv, v.verdict == "EMPTY" ? "-" : v.detail,
                      status));
      co.metrics.push_back(std::move(v));
    }
    co.verdict = bad ? "REGRESSION" : unsure ? "INCONCLUSIVE" : judged ? "ok" : "not compared";
    bad ? ++regressions : unsure ? ++inconclusive : judged ? ++ok : ++not_compared;
    o.configs.push_back(std::move(co));
  }
  int added = 0;
  for (const auto& key : cur.order)
    if (!base.by_key.count(key)) {
      ConfigOutcome co;
      co.label = label(key);
      name_key(key, co);
      co.verdict = "NEW";
      co.cur_lines = lines_text(cur.by_key.at(key).lines);
      say(fmt::format("{}\n  NEW in {} ({}): not in the baseline, not compared\n", co.label, cur_path, co.cur_lines));
      o.configs.push_back(std::move(co));
      ++added;
    }
  o.overall_geomean = overall_geomean(o.configs);
  say("\nOVERALL_GEOMEAN (geometric mean of the current/baseline medians over the configurations compared)\n");
  for (const auto& g : o.overall_geomean) say(fmt::format("  {:<15} {}\n", g.metric, g.text()));
  say(fmt::format("\n{} configuration(s) compared: {} ok, {} regressed, {} inconclusive, {} missing from the current "
                  "file, {} new{}\n",
                  base.order.size(), ok, regressions, inconclusive, missing, added,
                  not_compared ? fmt::format(", {} not compared (no baseline value)", not_compared) : ""));
  for (const auto& f : o.failures) say("FAIL " + f + "\n");
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say(o.verdict() + "\n");
  return o;
}

}  // namespace

// Adds the `compare` subcommand; returns it and the function that runs it once parsed.
std::pair<CLI::App*, std::function<int()>> add_compare_command(CLI::App& app) {
  struct Flags {
    std::string baseline, current;
    double tolerance = 5.0;
    double alpha = 0.05;
    bool per_machine = false;
    std::string format = "text";
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "compare two result CSVs by configuration; exit 1 when a throughput (tflops_per_gpu, tokens_per_s) "
      "drops, or the memory (peak_mem_gb) grows, by more than --tolerance percent (and, with repeated rows of a "
      "configuration on both sides, significantly by a Mann-Whitney U test), or a configuration is missing; exit 3 "
      "(INCONCLUSIVE) when the confidence interval reaches beyond the tolerance but no regression is shown; 0 (PASS) "
      "only when the data can tell");
  cmd->add_option("BASELINE", f->baseline, "the reference result CSV")->required();
  cmd->add_option("CURRENT", f->current, "the result CSV to check")->required();
  cmd->add_option("--tolerance", f->tolerance, "allowed change in percent")->capture_default_str();
  cmd->add_option("--alpha", f->alpha,
                  "significance level of the Mann-Whitney U test applied when both files hold repeated rows of a "
                  "configuration (several runs); a change beyond the tolerance is a regression only when significant")
      ->capture_default_str();
  cmd->add_flag("--per-machine", f->per_machine,
                "match rows by configuration and machine (the host and device columns), so that runs on one "
                "machine are only compared with runs on the same machine");
  cmd->add_option("--format", f->format,
                  "text (the console report), json, markdown (a pull-request comment) or junit (XML for CI test "
                  "reports); the others print only the report")
      ->capture_default_str();
  std::function<int()> run = [f] {
    if (!std::isfinite(f->tolerance) || f->tolerance < 0)
      usage_error("--tolerance {} must be a percentage, 0 or more", f->tolerance);
    if (!(f->alpha > 0 && f->alpha < 1)) usage_error("--alpha {} must be a probability between 0 and 1", f->alpha);
    const std::string& fm = f->format;
    if (fm != "text" && fm != "json" && fm != "markdown" && fm != "junit")
      usage_error("--format '{}' must be text, json, markdown or junit", fm);
    const CompareOutcome o = compare(f->baseline, f->current, f->tolerance, f->alpha, f->per_machine, fm == "text");
    if (fm == "json") fmt::print("{}", render_json(o));
    if (fm == "markdown") fmt::print("{}", render_markdown(o));
    if (fm == "junit") fmt::print("{}", render_junit(o));
    return o.exit_code();
  };
  return {cmd, run};
}

}  // namespace ptdp
