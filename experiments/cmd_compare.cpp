// `ptdp compare BASELINE.csv CURRENT.csv [--tolerance PCT]`: the throughput regression check.
// Rows of the two result CSVs are matched by their configuration key; for each configuration
// the throughput (tflops_per_gpu, tokens_per_s) and memory (peak_mem_gb) deltas are printed.
// Exit code 1 when a throughput is lower, or a memory higher, by more than PCT percent, or a
// baseline configuration is missing from CURRENT; 0 otherwise; 2 on bad input.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/common/error.h"
#include "core/runtime/csv_reader.h"

namespace ptdp {

namespace {

// The configuration key: what identifies one measured configuration (docs/ACCEPTANCE.md).
const std::vector<std::string>& key_columns() {
  static const std::vector<std::string> k = {"experiment", "mode",        "backend",      "model",    "tp",
                                             "pp",         "dp",          "vpp",          "micro_batch",
                                             "global_batch", "schedule",  "recompute",    "scatter_gather",
                                             "precision"};
  return k;
}

struct Metric {
  const char* column;
  bool higher_is_better;  // throughput: a drop is a regression; memory: a rise is
};
const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {{"tflops_per_gpu", true}, {"tokens_per_s", true}, {"peak_mem_gb", false}};
  return m;
}

struct Entry {
  int line = 0;
  std::vector<std::string> key;
  std::vector<std::optional<double>> values;  // per metric; nullopt: empty field
};

struct ResultSet {
  std::string path;
  std::vector<std::vector<std::string>> order;  // keys in first-seen order
  std::map<std::vector<std::string>, Entry> by_key;  // the last row of each key
  int duplicates = 0;
};

ResultSet load(const std::string& path) {
  std::vector<std::string> cols = key_columns();
  for (const auto& m : metrics()) cols.push_back(m.column);
  const CsvTable t = CsvTable::read(path, cols);
  ResultSet rs;
  rs.path = path;
  for (size_t i = 0; i < t.size(); ++i) {
    Entry e;
    e.line = t.line(i);
    for (const auto& k : key_columns()) e.key.push_back(t.text(i, k));
    for (const auto& m : metrics()) e.values.push_back(t.number_or_empty(i, m.column));
    auto it = rs.by_key.find(e.key);
    if (it == rs.by_key.end()) rs.order.push_back(e.key);
    else ++rs.duplicates;
    rs.by_key[e.key] = std::move(e);
  }
  return rs;
}

// "fig11/simulate/cuda f16 gpt-1.7b t=1 p=1 d=8 v=1 b=4 B=512 1f1b recompute=full sg=1"
std::string label(const std::vector<std::string>& k) {
  return fmt::format("{}/{}/{} {} {} t={} p={} d={} v={} b={} B={} {} recompute={} sg={}", k[0], k[1], k[2], k[13],
                     k[3], k[4], k[5], k[6], k[7], k[8], k[9], k[10], k[11], k[12]);
}

// Relative change of cur against base, in percent (+inf/-inf when the baseline is 0).
double delta_pct(double base, double cur) {
  if (base == 0) return cur == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), cur);
  return 100.0 * (cur - base) / std::fabs(base);
}

std::string fmt_value(const std::optional<double>& v) { return v ? fmt::format("{:.4g}", *v) : "-"; }

int compare(const std::string& base_path, const std::string& cur_path, double tol) {
  const ResultSet base = load(base_path);
  const ResultSet cur = load(cur_path);
  fmt::print("ptdp compare: baseline {} ({} configurations), current {} ({} configurations), tolerance {}%\n",
             base_path, base.order.size(), cur_path, cur.order.size(), tol);
  for (const ResultSet* rs : {&base, &cur})
    if (rs->duplicates)
      fmt::print("note: {} has {} rows repeating an earlier configuration; the last row of each is used\n", rs->path,
                 rs->duplicates);

  int regressions = 0, missing = 0, ok = 0;
  std::vector<std::string> failures;
  for (const auto& key : base.order) {
    const Entry& b = base.by_key.at(key);
    fmt::print("{}\n", label(key));
    auto it = cur.by_key.find(key);
    if (it == cur.by_key.end()) {
      fmt::print("  MISSING from {} (baseline line {})\n", cur_path, b.line);
      failures.push_back(fmt::format("missing: {} (baseline line {})", label(key), b.line));
      ++missing;
      continue;
    }
    const Entry& c = it->second;
    bool bad = false;
    for (size_t m = 0; m < metrics().size(); ++m) {
      const Metric& mt = metrics()[m];
      const auto& bv = b.values[m];
      const auto& cv = c.values[m];
      std::string delta = "-", status = "not compared (empty)";
      if (bv && cv) {
        const double d = delta_pct(*bv, *cv);
        delta = std::isfinite(d) ? fmt::format("{:+.2f}%", d) : (d > 0 ? "+inf%" : "-inf%");
        const bool regressed = mt.higher_is_better ? d < -tol : d > tol;
        status = regressed ? "REGRESSION" : "ok";
        if (regressed) {
          bad = true;
          failures.push_back(fmt::format("{}: {} {} -> {} ({}, beyond {}%) (baseline line {}, current line {})",
                                         label(key), mt.column, fmt_value(bv), fmt_value(cv), delta, tol, b.line,
                                         c.line));
        }
      }
      fmt::print("  {:<15} {:>12} -> {:>12}  {:>9}  {}\n", mt.column, fmt_value(bv), fmt_value(cv), delta, status);
    }
    bad ? ++regressions : ++ok;
  }
  int added = 0;
  for (const auto& key : cur.order)
    if (!base.by_key.count(key)) {
      fmt::print("{}\n  NEW in {} (line {}): not in the baseline, not compared\n", label(key), cur_path,
                 cur.by_key.at(key).line);
      ++added;
    }
  fmt::print("\n{} configuration(s) compared: {} ok, {} regressed, {} missing from the current file, {} new\n",
             base.order.size(), ok, regressions, missing, added);
  for (const auto& f : failures) fmt::print("FAIL {}\n", f);
  const bool pass = regressions == 0 && missing == 0;
  fmt::print("{}\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

// Adds the `compare` subcommand; returns it and the function that runs it once parsed.
std::pair<CLI::App*, std::function<int()>> add_compare_command(CLI::App& app) {
  struct Flags {
    std::string baseline, current;
    double tolerance = 5.0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "compare two result CSVs by configuration; exit 1 when a throughput (tflops_per_gpu, tokens_per_s) "
      "drops, or the memory (peak_mem_gb) grows, by more than --tolerance percent, or a configuration is missing");
  cmd->add_option("BASELINE", f->baseline, "the reference result CSV")->required();
  cmd->add_option("CURRENT", f->current, "the result CSV to check")->required();
  cmd->add_option("--tolerance", f->tolerance, "allowed change in percent")->capture_default_str();
  std::function<int()> run = [f] {
    if (!std::isfinite(f->tolerance) || f->tolerance < 0)
      usage_error("--tolerance {} must be a percentage, 0 or more", f->tolerance);
    return compare(f->baseline, f->current, f->tolerance);
  };
  return {cmd, run};
}

}  // namespace ptdp
