// End-to-end tests of `ptdp compare`: rows matched by configuration (and machine with
// --per-machine), repeated rows as samples, exit 1 on a throughput drop or a memory rise beyond the
// tolerance (and significant, with enough samples) or a missing configuration, 0 otherwise, and a
// usage error naming the file and the line for a malformed CSV. Recorded noisy runs of this
// machine (experiments/testdata/) are fed in, no timing is asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/testing/data_test_util.h"
#include "core/config/results_csv.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;
using testing::write_text;

struct Measured {
  std::string model = "small";
  int tp = 1, pp = 1, dp = 1;
  double tflops = 0.136, tokens = 4564, mem = 0.168;
  std::string host = "", device = "";
};

ResultRow make_row(const Measured& m) {
  ResultRow r;
  r.set("experiment", std::string("train-small"));
  r.set("mode", std::string("run"));
  r.set("backend", std::string("cpu"));
  r.set("comm", std::string("local"));
  r.set("precision", std::string("f32"));
  r.set("model", m.model);
  r.set("tp", m.tp);
  r.set("pp", m.pp);
  r.set("dp", m.dp);
  r.set("vpp", 1);
  r.set("micro_batch", 4);
  r.set("global_batch", 8);
  r.set("schedule", std::string("1f1b"));
  r.set("recompute", std::string("none"));
  r.set("scatter_gather", 1);
  r.set("tflops_per_gpu", m.tflops);
  r.set("tokens_per_s", m.tokens);
  r.set("peak_mem_gb", m.mem);
  r.set("git_sha", std::string("0123abcd"));
  if (!m.host.empty()) r.set("host", m.host);
  if (!m.device.empty()) r.set("device", m.device);
  return r;
}

std::string write_rows(const TempDir& dir, const std::string& name, const std::vector<Measured>& rows) {
  const std::string path = dir.file(name);
  std::vector<ResultRow> r;
  for (const auto& m : rows) r.push_back(make_row(m));
  append_result_rows(path, r);
  return path;
}

// Two configurations: small at t=1 and t=2.
std::vector<Measured> baseline_rows() {
  Measured a, b;
  b.tp = 2;
  b.tflops = 0.09;
  b.tokens = 3000;
  b.mem = 0.1;
  return {a, b};
}

CliResult compare(const TempDir& dir, const std::string& base, const std::string& cur,
                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"compare", base, cur};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_ptdp(dir, args);
}

TEST(CliCompare, IdenticalFilesPass) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  const auto cur = write_rows(dir, "cur.csv", baseline_rows());
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 configuration(s) compared: 2 ok, 0 regressed, 0 inconclusive, 0 missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nPASS\n"), std::string::npos) << r.out;
}

TEST(CliCompare, ThroughputDropBeyondToleranceFailsAndNamesTheRow) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[1].tokens *= 0.90;  // -10% with --tolerance 5
  const auto cur = write_rows(dir, "cur.csv", rows);
  const CliResult r = compare(dir, base, cur, {"--tolerance", "5"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL train-small/run/cpu f32 small t=2 p=1 d=1 v=1 b=4 B=8 1f1b recompute=none sg=1: "
                       "tokens_per_s 3000 -> 2700 (-10.00%, beyond 5%)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 ok, 1 regressed"), std::string::npos) << r.out;
}

TEST(CliCompare, TflopsDropBeyondToleranceFails) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[0].tflops *= 0.5;
  const CliResult r = compare(dir, base, write_rows(dir, "cur.csv", rows), {"--tolerance", "20"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tflops_per_gpu 0.136 -> 0.068 (-50.00%, beyond 20%)"), std::string::npos) << r.out;
}

TEST(CliCompare, ChangesWithinToleranceAndImprovementsPass) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[0].tokens *= 0.97;  // -3% with the default tolerance of 5%
  rows[0].mem *= 1.04;     // +4%
  rows[1].tflops *= 1.5;   // faster
  rows[1].mem *= 0.5;      // smaller
  const CliResult r = compare(dir, base, write_rows(dir, "cur.csv", rows));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(CliCompare, MemoryRiseBeyondToleranceFails) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[0].mem *= 1.10;
  const CliResult r = compare(dir, base, write_rows(dir, "cur.csv", rows), {"--tolerance", "5"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("peak_mem_gb 0.168 -> 0.1848 (+10.00%, beyond 5%)"), std::string::npos) << r.out;
}

TEST(CliCompare, ConfigurationMissingFromCurrentFails) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  const auto cur = write_rows(dir, "cur.csv", {baseline_rows()[0]});
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL missing: train-small/run/cpu f32 small t=2 p=1 d=1"), std::string::npos) << r.out;
}

TEST(CliCompare, NewConfigurationInCurrentIsReportedNotFailed) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", {baseline_rows()[0]});
  const auto cur = write_rows(dir, "cur.csv", baseline_rows());
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("NEW in " + cur + " (line 3)"), std::string::npos) << r.out;
}

// Rows repeating a configuration are samples: the Hodges-Lehmann estimate is robust to one
// outlying run, where the old "last row counts" rule would have judged by that run alone: no
// regression. The outlier widens the interval beyond the tolerance, so the verdict is
// INCONCLUSIVE (exit 3), not a pass.
TEST(CliCompare, RepeatedRowsAreSamplesAndOneOutlierDoesNotDecide) {
  TempDir dir;
  std::vector<Measured> base, cur;
  for (double t : {4564.0, 4600.0, 4520.0, 4580.0, 4550.0}) {
    Measured m;
    m.tokens = t;
    base.push_back(m);
  }
  for (double t : {4570.0, 4590.0, 4530.0, 4560.0, 900.0}) {
    Measured m;
    m.tokens = t;
    cur.push_back(m);
  }
  const CliResult r = compare(dir, write_rows(dir, "base.csv", base), write_rows(dir, "cur.csv", cur));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("n=5/5  INCONCLUSIVE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("REGRESSION"), std::string::npos) << r.out;
}

// A change beyond the tolerance that the samples cannot tell from noise is neither a pass nor a
// failure: INCONCLUSIVE, exit 3, with about how many runs a side would decide it.
TEST(CliCompare, AChangeBeyondToleranceThatIsNotSignificantIsInconclusive) {
  TempDir dir;
  std::vector<Measured> base, cur;
  for (double t : {4000.0, 5200.0, 3900.0, 5100.0, 4100.0}) {
    Measured m;
    m.tokens = t;
    base.push_back(m);
  }
  for (double t : {3700.0, 5000.0, 3600.0, 4900.0, 3800.0}) {
    Measured m;
    m.tokens = t;
    cur.push_back(m);
  }
  const CliResult r = compare(dir, write_rows(dir, "base.csv", base), write_rows(dir, "cur.csv", cur));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("INCONCLUSIVE (the interval reaches beyond 5%, not significant at 0.05; about "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("runs a side would decide it)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 inconclusive"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nINCONCLUSIVE\n"), std::string::npos) << r.out;
}

// Two samples a side can never reach p < 0.05 (the smallest p is 1/3): the medians are judged by
// the tolerance alone, and the output says so.
TEST(CliCompare, TooFewSamplesFallBackToTheToleranceOnTheMedians) {
  TempDir dir;
  Measured a, b;
  b.tokens = 3000;
  const CliResult r = compare(dir, write_rows(dir, "base.csv", {a, a}), write_rows(dir, "cur.csv", {b, b}));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tolerance only: too few samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lines 2,3"), std::string::npos) << r.out;
}

// Recorded on the 2-core development machine while other builds ran (experiments/testdata/
// track_noise_*.csv: scripts/track.sh's benchmark, 12 runs of one build alternating between the
// two files; the runs spread by about +-15%). Two runs of the same build are quiet; the same runs
// of the second file slowed by a planted 15% are flagged.
std::string scaled_copy(const TempDir& dir, const std::string& src, double factor) {
  std::ifstream in(src);
  std::string header, line, out;
  std::getline(in, header);
  std::vector<std::string> cols;
  for (std::stringstream hs(header); std::getline(hs, line, ',');) cols.push_back(line);
  out = header + "\n";
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    for (size_t i = 0; i < cols.size() && i < f.size(); ++i)
      if (cols[i] == "tokens_per_s" || cols[i] == "tflops_per_gpu") f[i] = std::to_string(std::stod(f[i]) * factor);
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return write_text(dir, "scaled.csv", out);
}

TEST(CliCompare, RecordedRunsOfOneBuildAreQuietAndAPlanted15PercentSlowdownIsFlagged) {
  TempDir dir;
  const std::string a = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_a.csv";
  const std::string b = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_b.csv";
  const CliResult same = compare(dir, a, b);
  // The interval holds 0 and the test sees nothing (SciPy: mannwhitneyu(b, a).pvalue = 0.6991), but
  // it reaches -12.68%, beyond the 5% tolerance: six runs a side cannot tell a pass from a
  // regression at this noise, and the output says so instead of passing.
  EXPECT_EQ(same.exit_code, 3) << same.out;
  EXPECT_NE(same.out.find("tokens_per_s            2762 ->         2727  -1.74% [-12.68%, +11.98%] p=0.699 n=6/6  "
                          "INCONCLUSIVE"),
            std::string::npos)
      << same.out;
  const CliResult slow = compare(dir, a, scaled_copy(dir, b, 1 / 1.15));
  EXPECT_EQ(slow.exit_code, 1) << slow.out;
  // The interval lies below 0 and beyond the tolerance; SciPy's exact p for U = 3 of 36 is 0.01515.
  EXPECT_NE(slow.out.find("tokens_per_s            2762 ->         2372  -14.56% [-24.07%, -2.62%] p=0.0152 n=6/6  "
                          "REGRESSION"),
            std::string::npos)
      << slow.out;
  // The single-run comparison the tracker did before: the first run of each file, same build,
  // already differs by more than the 5% tolerance.
  std::ifstream in(a);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  std::ifstream in2(b);
  std::string header2, first2;
  std::getline(in2, header2);
  std::getline(in2, first2);
  const CliResult one = compare(dir, write_text(dir, "a1.csv", header + "\n" + first + "\n"),
                                write_text(dir, "b1.csv", header2 + "\n" + first2 + "\n"));
  EXPECT_EQ(one.exit_code, 1) << one.out;
}

// A second recording on the same machine, 8 runs of one build a file, alternating between the
// files, made while three builds overloaded its 2 cores (load average 7-9;
// experiments/testdata/track_noise_{c,d}.csv): 155-862 tokens/s, where a quiet run gives about
// 4500. The same build stays quiet even so. A planted 15% slowdown is beyond the tolerance but
// cannot be told from noise that wide: the output says so instead of failing or passing silently.
TEST(CliCompare, RunsRecordedUnderOverloadAreQuietAndSayASlowdownCannotBeSeparatedFromTheNoise) {
  TempDir dir;
  const std::string c = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_c.csv";
  const std::string d = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_d.csv";
  const CliResult same = compare(dir, c, d);
  EXPECT_EQ(same.exit_code, 3) << same.out;
  // SciPy: mannwhitneyu(d, c).pvalue = 1.0.
  EXPECT_NE(same.out.find("tokens_per_s           365.6 ->        402.5  -1.69% [-46.61%, +69.16%] p=1 n=8/8  "
                          "INCONCLUSIVE"),
            std::string::npos)
      << same.out;
  const CliResult slow = compare(dir, c, scaled_copy(dir, d, 1 / 1.15));
  EXPECT_EQ(slow.exit_code, 3) << slow.out;
  // SciPy: mannwhitneyu(d / 1.15, c).pvalue = 0.7209.
  EXPECT_NE(slow.out.find("p=0.721 n=8/8  INCONCLUSIVE (the interval reaches beyond 5%, not significant at 0.05"),
            std::string::npos)
      << slow.out;
}

Measured on(const std::string& host, const std::string& device, double tokens) {
  Measured m;
  m.host = host;
  m.device = device;
  m.tokens = tokens;
  return m;
}

// Without --per-machine the configuration is the key, and runs made on other machines are named.
TEST(CliCompare, RunsOnAnotherMachineAreNamedInANote) {
  TempDir dir;
  std::vector<Measured> base, cur;
  for (double t : {4564.0, 4600.0, 4520.0, 4580.0}) base.push_back(on("vm", "AMD EPYC", t));
  for (double t : {4570.0, 4590.0, 4530.0, 4560.0}) cur.push_back(on("ci-7", "Xeon 8480", t));
  const CliResult r = compare(dir, write_rows(dir, "base.csv", base), write_rows(dir, "cur.csv", cur));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("note: baseline measured on vm/AMD EPYC, current on ci-7/Xeon 8480: the change includes"),
            std::string::npos)
      << r.out;
  const CliResult same = compare(dir, write_rows(dir, "b2.csv", base), write_rows(dir, "c2.csv", base));
  EXPECT_EQ(same.out.find("note: baseline measured on"), std::string::npos) << same.out;
}

// A history holding two machines: --per-machine compares each machine's runs with its own, so a
// 15% slowdown on the slower machine is found, and the faster machine's runs do not hide it.
TEST(CliCompare, PerMachineComparesEachMachineWithItself) {
  TempDir dir;
  const std::vector<double> fast = {4564, 4600, 4520, 4580, 4550, 4610};
  const std::vector<double> slow = {3010, 2950, 3060, 2990, 3030, 2970};
  std::vector<Measured> base, cur;
  for (size_t i = 0; i < fast.size(); ++i) {
    base.push_back(on("vm", "AMD EPYC", fast[i]));
    base.push_back(on("ci-7", "Xeon 8480", slow[i]));
    cur.push_back(on("vm", "AMD EPYC", fast[(i + 1) % fast.size()]));
    cur.push_back(on("ci-7", "Xeon 8480", slow[i] / 1.15));
  }
  const auto b = write_rows(dir, "base.csv", base);
  const auto c = write_rows(dir, "cur.csv", cur);
  const CliResult r = compare(dir, b, c, {"--per-machine"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("2 configuration(s) compared: 1 ok, 1 regressed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL train-small/run/cpu f32 small t=1 p=1 d=1 v=1 b=4 B=8 1f1b recompute=none sg=1 on "
                       "ci-7/Xeon 8480: tokens_per_s"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("note: baseline measured on"), std::string::npos) << r.out;
  // Pooled, the two machines' runs make one bimodal sample: the note says so, and the slowdown
  // of half the runs is not told from noise: inconclusive.
  const CliResult pooled = compare(dir, b, c);
  EXPECT_EQ(pooled.exit_code, 3) << pooled.out;
  EXPECT_NE(pooled.out.find("note: baseline measured on vm/AMD EPYC, ci-7/Xeon 8480"), std::string::npos)
      << pooled.out;
}

// Four runs a side is the least that can reach p < 0.05 (2/C(8,4) = 0.029): the test is applied.
// Three against four cannot (2/C(7,3) = 0.057), so the medians are judged by the tolerance alone.
TEST(CliCompare, FourRunsASideAreTestedThreeAgainstFourAreNot) {
  TempDir dir;
  auto runs = [](std::vector<double> ts) {
    std::vector<Measured> v;
    for (double t : ts) {
      Measured m;
      m.tokens = t;
      v.push_back(m);
    }
    return v;
  };
  const auto b4 = write_rows(dir, "b4.csv", runs({4500, 4600, 4550, 4520}));
  const auto c4 = write_rows(dir, "c4.csv", runs({3900, 3950, 3920, 3880}));
  const CliResult four = compare(dir, b4, c4);
  EXPECT_EQ(four.exit_code, 1) << four.out;
  EXPECT_NE(four.out.find("p=0.0286 n=4/4  REGRESSION"), std::string::npos) << four.out;
  const auto b3 = write_rows(dir, "b3.csv", runs({4500, 4600, 4550}));
  const CliResult three = compare(dir, b3, c4);
  EXPECT_EQ(three.exit_code, 1) << three.out;
  EXPECT_NE(three.out.find("n=3/4  REGRESSION (tolerance only: too few samples for a significance test)"),
            std::string::npos)
      << three.out;
}

TEST(CliCompare, AlphaMustBeAProbability) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  const CliResult r = compare(dir, base, base, {"--alpha", "1.5"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("--alpha"), std::string::npos) << r.err;
}

// A metric the baseline measured and the current file left empty (a run that died before writing
// it) fails; one the baseline lacks is not compared.
TEST(CliCompare, AMetricEmptyInTheCurrentFileFailsAndOneEmptyInTheBaselineIsNotCompared) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto text = testing::text_of(base);
  // Blank the first row's peak_mem_gb.
  const std::string blanked = text.replace(text.find(",0.168,"), 7, ",,");
  const auto cur = write_text(dir, "cur.csv", blanked);
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("EMPTY: the current file has no value (1 in the baseline)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL train-small"), std::string::npos) << r.out;
  const CliResult back = compare(dir, cur, base);
  EXPECT_EQ(back.exit_code, 0) << back.out;
  EXPECT_NE(back.out.find("not compared (no baseline value)"), std::string::npos) << back.out;
}

// The same outcome for machines: JSON (nlohmann::json parses it back), Markdown and JUnit XML,
// with the exit code of the verdict; a regression is a JUnit failure, an inconclusive metric a
// skipped test case.
TEST(CliCompare, JsonMarkdownAndJunitReportTheSameVerdicts) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  std::vector<Measured> slower = baseline_rows();
  slower[0].tokens *= 0.8;
  const auto cur = write_rows(dir, "cur.csv", slower);
  const CliResult json = compare(dir, base, cur, {"--format", "json"});
  EXPECT_EQ(json.exit_code, 1) << json.out;
  EXPECT_EQ(json.out.find("ptdp compare:"), std::string::npos) << "only the report: " << json.out;
  for (const char* needle : {"\"verdict\": \"FAIL\"", "\"exit_code\": 1", "\"regressed\": 1", "\"metric\": \"tokens_per_s\"",
                             "\"change_pct\": -20.0"})
    EXPECT_NE(json.out.find(needle), std::string::npos) << needle << "\n" << json.out;
  const CliResult md = compare(dir, base, cur, {"--format", "markdown"});
  EXPECT_EQ(md.exit_code, 1);
  EXPECT_NE(md.out.find("### ptdp compare: **FAIL**"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tokens_per_s | 4564 | 3651 | -20.00% | REGRESSION |"), std::string::npos) << md.out;
  const CliResult junit = compare(dir, base, cur, {"--format", "junit"});
  EXPECT_EQ(junit.exit_code, 1);
  EXPECT_NE(junit.out.find("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"), std::string::npos) << junit.out;
  EXPECT_NE(junit.out.find("tests=\"6\" failures=\"1\""), std::string::npos) << junit.out;
  EXPECT_NE(junit.out.find("<failure type=\"REGRESSION\" message=\"REGRESSION: 4564 -&gt; 3651: -20.00%\"/>"),
            std::string::npos)
      << junit.out;
  const CliResult same = compare(dir, base, base, {"--format", "json"});
  EXPECT_EQ(same.exit_code, 0);
  EXPECT_NE(same.out.find("\"verdict\": \"PASS\""), std::string::npos) << same.out;
  EXPECT_TRUE(IsUsageError(compare(dir, base, base, {"--format", "yaml"}),
                           {"--format 'yaml' must be text, json, markdown or junit"}));
}

// A baseline with nothing to compare (a header only, or rows without any metric value) is not a
// pass in any format (it was: PASS, exit 0, JUnit tests="0"): one error line naming the file,
// exit 2, nothing on stdout. A configuration of the baseline without values is "not compared".
TEST(CliCompare, ABaselineWithNothingToCompareIsRefusedInEveryFormat) {
  TempDir dir;
  const auto cur = write_rows(dir, "cur.csv", baseline_rows());
  const auto header_only = write_text(dir, "header.csv", result_header_line() + "\n");
  std::vector<ResultRow> blank;
  for (const auto& m : baseline_rows()) {
    blank.push_back(make_row(m));
    for (const char* c : {"tflops_per_gpu", "tokens_per_s", "peak_mem_gb"}) blank.back().set(c, std::string());
  }
  const std::string no_values = dir.file("blank.csv");
  append_result_rows(no_values, blank);
  for (const char* format : {"text", "json", "markdown", "junit"}) {
    const CliResult h = compare(dir, header_only, cur, {"--format", format});
    EXPECT_TRUE(IsUsageError(h, {header_only + ": no result rows (only a header): nothing to compare against"}))
        << format;
    EXPECT_EQ(h.out, "") << format;
    const CliResult e = compare(dir, no_values, cur, {"--format", format});
    EXPECT_TRUE(IsUsageError(e, {no_values + ": no row has a value of tflops_per_gpu, tokens_per_s, peak_mem_gb: "
                                             "nothing to compare against"}))
        << format;
  }
  // One configuration without values beside one with: that one is compared, the other named.
  std::vector<ResultRow> half = {make_row(baseline_rows()[0]), blank[1]};
  const std::string half_path = dir.file("half.csv");
  append_result_rows(half_path, half);
  const CliResult r = compare(dir, half_path, cur);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 configuration(s) compared: 1 ok, 0 regressed, 0 inconclusive, 0 missing from the current "
                       "file, 0 new, 1 not compared (no baseline value)"),
            std::string::npos)
      << r.out;
}

// xmllint's verdict on an XML file (libxml2-utils, scripts/setup_packages.sh): 0 when it is
// well-formed and, with a schema, valid; its messages are appended to `log`.
int xmllint(const TempDir& dir, const std::string& xml_text, std::string& log, const std::string& schema = "") {
  const std::string path = write_text(dir, "report.xml", xml_text), out = dir.file("xmllint.log");
  const std::string cmd = "xmllint --noout " + (schema.empty() ? "" : "--schema '" + schema + "' ") + "'" + path +
                          "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  log += testing::text_of(out);
  return rc;
}

// Labels are written as they are in every format: a byte that is not UTF-8 (Latin-1 text) as
// U+FFFD (JSON exited 1, the regression code, and the JUnit XML did not parse), a tab kept in an
// XML attribute as &#9; (raw, it reads as a space), and <b> shown as text in Markdown, not HTML.
TEST(CliCompare, LabelsWithAnyBytesAreWrittenAsTheyAreInEveryFormat) {
  TempDir dir;
  ResultRow row = make_row(Measured{});
  row.set("experiment", std::string("caf\xe9 <b>\tbold</b> & more"));
  const std::string path = dir.file("odd.csv");
  append_result_rows(path, {row});
  const CliResult json = compare(dir, path, path, {"--format", "json"});
  EXPECT_EQ(json.exit_code, 0) << json.out << json.err;
  nlohmann::json doc;
  EXPECT_NO_THROW(doc = nlohmann::json::parse(json.out)) << json.out;
  EXPECT_NE(json.out.find("caf\xEF\xBF\xBD <b>\\tbold</b> & more"), std::string::npos) << json.out;
  const CliResult junit = compare(dir, path, path, {"--format", "junit"});
  EXPECT_EQ(junit.exit_code, 0) << junit.out << junit.err;
  std::string log;
  EXPECT_EQ(xmllint(dir, junit.out, log), 0) << log << junit.out;
  EXPECT_NE(junit.out.find("caf\xEF\xBF\xBD &lt;b&gt;&#9;bold&lt;/b&gt; &amp; more"), std::string::npos) << junit.out;
  EXPECT_EQ(junit.out.find('\t'), std::string::npos) << junit.out;
  const CliResult md = compare(dir, path, path, {"--format", "markdown"});
  EXPECT_EQ(md.exit_code, 0) << md.out << md.err;
  EXPECT_NE(md.out.find("| caf\xEF\xBF\xBD &lt;b&gt;\tbold&lt;/b&gt; &amp; more/run/cpu"), std::string::npos) << md.out;
  EXPECT_EQ(md.out.find("<b>"), std::string::npos) << md.out;
}

// JSON keys each configuration by its fields, an object of every key column (the machine's
// columns beside it with --per-machine), not by a display string; the label comes with it.
TEST(CliCompare, JsonKeysConfigurationsByTheirKeyColumns) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", {on("vm", "AMD EPYC", 4564), on("vm", "AMD EPYC", 4600)});
  auto rows = baseline_rows();
  const auto two = write_rows(dir, "two.csv", rows);
  const CliResult r = compare(dir, two, two, {"--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto& configs = doc.at("configurations");
  ASSERT_EQ(configs.size(), 2u) << r.out;
  for (const auto& c : configs) {
    ASSERT_TRUE(c.at("configuration").is_object()) << c;
    EXPECT_EQ(c.at("configuration").size(), config_key_columns().size()) << c;
    for (const auto& k : config_key_columns()) EXPECT_TRUE(c.at("configuration").contains(k)) << k;
    EXPECT_TRUE(c.at("machine").is_null()) << c;
    EXPECT_EQ(c.at("label").get<std::string>().rfind("train-small/run/cpu f32 small t=", 0), 0u) << c;
  }
  EXPECT_EQ(configs[1].at("configuration").at("tp"), "2");
  EXPECT_EQ(configs[1].at("configuration").at("comm"), "local");
  EXPECT_EQ(configs[1].at("configuration").at("zero"), "0");  // empty in the file: the key's default
  const CliResult m = compare(dir, base, base, {"--format", "json", "--per-machine"});
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  const nlohmann::json machine = nlohmann::json::parse(m.out).at("configurations").at(0).at("machine");
  EXPECT_EQ(machine, nlohmann::json({{"host", "vm"}, {"device", "AMD EPYC"}})) << m.out;
}

// Every format carries the overall geometric mean of the current/baseline medians over the
// configurations compared (Google Benchmark's OVERALL_GEOMEAN): tflops at 0.5x on one and 1x on
// the other give sqrt(0.5), -29.29%; tokens at 0.8x and 1x give sqrt(0.8), -10.56%.
TEST(CliCompare, EveryFormatHasTheOverallGeomean) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[0].tflops *= 0.5;
  rows[0].tokens *= 0.8;
  const auto cur = write_rows(dir, "cur.csv", rows);
  const CliResult text = compare(dir, base, cur);
  EXPECT_EQ(text.exit_code, 1) << text.out;
  EXPECT_NE(text.out.find("\nOVERALL_GEOMEAN (geometric mean of the current/baseline medians over the configurations "
                          "compared)\n  tflops_per_gpu  -29.29% over 2 configurations\n"
                          "  tokens_per_s    -10.56% over 2 configurations\n"
                          "  peak_mem_gb     +0.00% over 2 configurations\n"),
            std::string::npos)
      << text.out;
  const CliResult json = compare(dir, base, cur, {"--format", "json"});
  const nlohmann::json g = nlohmann::json::parse(json.out).at("overall_geomean");
  EXPECT_NEAR(g.at("tflops_per_gpu").at("ratio").get<double>(), std::sqrt(0.5), 1e-5) << json.out;
  EXPECT_NEAR(g.at("tokens_per_s").at("change_pct").get<double>(), 100 * (std::sqrt(0.8) - 1), 1e-3) << json.out;
  EXPECT_EQ(g.at("peak_mem_gb").at("configurations"), 2) << json.out;
  const CliResult md = compare(dir, base, cur, {"--format", "markdown"});
  EXPECT_NE(md.out.find("| OVERALL_GEOMEAN | tflops_per_gpu | | | -29.29% over 2 configurations | |"),
            std::string::npos)
      << md.out;
  const CliResult junit = compare(dir, base, cur, {"--format", "junit"});
  EXPECT_NE(junit.out.find("<property name=\"overall_geomean.tokens_per_s\" value=\"-10.56% over 2 configurations\"/>"),
            std::string::npos)
      << junit.out;
}

// The JUnit report is valid under the strict Ant JUnit schema (experiments/testdata/junit_ant.xsd,
// checked by xmllint) for every outcome: a pass, a regression with a missing configuration, an
// empty metric, inconclusive (skipped) metrics, labels with odd bytes. It lacked time, timestamp
// and hostname (and package, id, properties, system-out, system-err, a failure's type), which
// that schema requires; the schema is strict: the report without its hostname is rejected.
TEST(CliCompare, JunitIsValidUnderTheStrictAntSchema) {
  TempDir dir;
  const std::string schema = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/junit_ant.xsd";
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto rows = baseline_rows();
  rows[0].tokens *= 0.8;
  const auto slower_one_missing = write_rows(dir, "slower.csv", {rows[0]});
  std::string text = testing::text_of(base);
  const auto blanked = write_text(dir, "blanked.csv", text.replace(text.find(",0.168,"), 7, ",,"));
  ResultRow odd = make_row(Measured{});
  odd.set("experiment", std::string("caf\xe9 <b>\tbold</b>"));
  const std::string odd_path = dir.file("odd.csv");
  append_result_rows(odd_path, {odd});
  const std::string noisy_a = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_a.csv";
  const std::string noisy_b = std::string(PTDP_SOURCE_DIR) + "/experiments/testdata/track_noise_b.csv";
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {base, base}, {base, slower_one_missing}, {base, blanked}, {noisy_a, noisy_b}, {odd_path, odd_path}};
  for (const auto& [b, c] : pairs) {
    const CliResult r = compare(dir, b, c, {"--format", "junit"});
    std::string log;
    EXPECT_EQ(xmllint(dir, r.out, log, schema), 0) << b << " " << c << "\n" << log << r.out;
    EXPECT_NE(r.out.find("<property name=\"verdict\""), std::string::npos) << r.out;
  }
  const CliResult r = compare(dir, base, slower_one_missing, {"--format", "junit"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("<failure type=\"MISSING\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<failure type=\"REGRESSION\" message=\"REGRESSION: 4564 -&gt; 3651: -20.00%\"/>"),
            std::string::npos)
      << r.out;
  const size_t host = r.out.find(" hostname=\"");
  ASSERT_NE(host, std::string::npos) << r.out;
  std::string without_host = r.out;
  without_host.erase(host, r.out.find('"', host + 11) + 1 - host);
  std::string log;
  EXPECT_NE(xmllint(dir, without_host, log, schema), 0) << without_host;
  EXPECT_NE(log.find("'hostname' is required"), std::string::npos) << log;
}

// ---- malformed input: one line naming the file (and line), exit code 2 ----

TEST(CliCompare, MissingFileIsAUsageError) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  EXPECT_TRUE(IsUsageError(compare(dir, base, dir.file("nope.csv")), {dir.file("nope.csv") + ": cannot be opened"}));
}

TEST(CliCompare, MissingColumnNamesFileAndColumn) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  const auto cur = write_text(dir, "cur.csv", "experiment,mode\ntrain,run\n");
  EXPECT_TRUE(IsUsageError(compare(dir, base, cur), {cur + ":1: no column 'backend' in the header"}));
}

TEST(CliCompare, BadNumberNamesFileLineAndColumn) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  std::string text = testing::text_of(base);
  text.replace(text.rfind(",0.09,"), 6, ",fast,");  // line 3's tflops_per_gpu
  const auto cur = write_text(dir, "cur.csv", text);
  EXPECT_TRUE(IsUsageError(compare(dir, base, cur), {cur + ":3: column 'tflops_per_gpu': 'fast' is not a number"}));
}

// A metric or a timing that is not finite (inf, -nan: a run that divided by a zero time) is
// refused in either file with the file, the line and the column; the timings were not read.
TEST(CliCompare, NonFiniteMetricsAndTimingsAreRefusedNamingFileLineAndColumn) {
  TempDir dir;
  const auto good = write_rows(dir, "good.csv", baseline_rows());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tokens_per_s", "inf"}, {"tflops_per_gpu", "-nan"}, {"peak_mem_gb", "nan"}, {"iter_time_ms", "inf"},
      {"fwd_ms", "-inf"},      {"layer_bwd_ms", "nan"}};
  int n = 0;
  for (const auto& [column, value] : cases) {
    std::vector<ResultRow> rows;
    for (const auto& m : baseline_rows()) rows.push_back(make_row(m));
    rows[1].set(column, value);
    const std::string bad = dir.file("bad" + std::to_string(n++) + ".csv");
    append_result_rows(bad, rows);
    const std::string want = bad + ":3: column '" + column + "': '" + value + "' is not a finite number";
    EXPECT_TRUE(IsUsageError(compare(dir, good, bad), {want})) << column;
    EXPECT_TRUE(IsUsageError(compare(dir, bad, good, {"--format", "junit"}), {want})) << column;
  }
}

TEST(CliCompare, WrongFieldCountNamesFileAndLine) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  std::string text = testing::text_of(base);
  text += "train-small,run,cpu\n";  // line 4: 3 fields
  const auto cur = write_text(dir, "cur.csv", text);
  EXPECT_TRUE(IsUsageError(compare(dir, base, cur), {cur + ":4: 3 fields, the header has"}));
}

TEST(CliCompare, MalformedBaselineIsNamedToo) {
  TempDir dir;
  const auto base = write_text(dir, "base.csv", "");
  const auto cur = write_rows(dir, "cur.csv", baseline_rows());
  EXPECT_TRUE(IsUsageError(compare(dir, base, cur), {base + ":1: the file is empty"}));
}

TEST(CliCompare, NegativeToleranceIsRefused) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  EXPECT_TRUE(IsUsageError(compare(dir, base, base, {"--tolerance", "-1"}), {"--tolerance -1"}));
}

TEST(CliCompare, BothFilesAreRequired) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"compare", "only-one.csv"}), {"CURRENT"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Rows that differ in sequence parallelism, --stack, --zero, or (for custom models sharing a name)
// in shape or architecture are different configurations: never paired, whatever their numbers.
TEST(CliCompare, RowsThatDifferInSequenceParallelStackZeroShapeOrArchAreNotPaired) {
  TempDir dir;
  struct Variant {
    const char* column;
    std::string base, cur;
  };
  const std::vector<Variant> variants = {{"sequence_parallel", "0", "1"}, {"stack", "megatron-2021", "mcore"},
                                         {"zero", "0", "1"},              {"layers", "2", "4"},
                                         {"hidden", "64", "128"},         {"heads", "4", "8"},
                                         {"seq_length", "64", "128"},     {"vocab_size", "512", "1024"},
                                         {"arch", "gpt", "llama"}};
  for (const auto& v : variants) {
    Measured m;
    m.model = "tiny-custom";
    ResultRow b = make_row(m), c = make_row(m);
    b.set(v.column, v.base);
    c.set(v.column, v.cur);
    c.set("tflops_per_gpu", 0.136 * 1.71);  // +71%: would be "ok" if paired
    const std::string bp = dir.file("b.csv"), cp = dir.file("c.csv");
    std::remove(bp.c_str());
    std::remove(cp.c_str());
    append_result_rows(bp, {b});
    append_result_rows(cp, {c});
    const CliResult r = compare(dir, bp, cp);
    EXPECT_EQ(r.exit_code, 1) << v.column << "\n" << r.out;
    EXPECT_NE(r.out.find("0 ok, 0 regressed, 0 inconclusive, 1 missing from the current file, 1 new"), std::string::npos)
        << v.column << "\n" << r.out;
  }
}

// Every key column (config_key_columns: --overlap-grad-reduce, --grad-bucket-size, the placement
// of the stages, the attention's query groups, ...) separates configurations: rows that differ in
// any one of them alone are never paired.
TEST(CliCompare, RowsThatDifferInAnyOneKeyColumnAreNotPaired) {
  TempDir dir;
  for (const std::string& column : config_key_columns()) {
    ResultRow b = make_row(Measured{}), c = make_row(Measured{});
    b.set(column, std::string("7"));
    c.set(column, std::string("8"));
    c.set("tflops_per_gpu", 0.136 * 1.71);  // +71%: would be "ok" if paired
    const std::string bp = dir.file("b.csv"), cp = dir.file("c.csv");
    std::remove(bp.c_str());
    std::remove(cp.c_str());
    append_result_rows(bp, {b});
    append_result_rows(cp, {c});
    const CliResult r = compare(dir, bp, cp);
    EXPECT_EQ(r.exit_code, 1) << column << "\n" << r.out;
    EXPECT_NE(r.out.find("0 ok, 0 regressed, 0 inconclusive, 1 missing from the current file, 1 new"), std::string::npos)
        << column << "\n" << r.out;
  }
}

// The classname attributes of a JUnit report, each once.
std::set<std::string> junit_classnames(const std::string& xml) {
  std::set<std::string> names;
  const std::string attr = "classname=\"";
  for (size_t at = xml.find(attr); at != std::string::npos; at = xml.find(attr, at + 1)) {
    const size_t from = at + attr.size();
    names.insert(xml.substr(from, xml.find('"', from) - from));
  }
  return names;
}

// Labels are built from every key column: two configurations that differ only in one of them
// (query_groups, ffn_hidden_size, norm_eps, stage_layers, ... were left out) are two JUnit
// classnames, not one; a column at its default in every row is not named, one off it always is.
TEST(CliCompare, ConfigurationsThatDifferInAnyOneKeyColumnHaveTheirOwnLabels) {
  TempDir dir;
  for (const std::string& column : config_key_columns()) {
    ResultRow a = make_row(Measured{}), b = make_row(Measured{});
    a.set(column, std::string("7"));
    b.set(column, std::string("8"));
    const std::string path = dir.file("two.csv");
    std::remove(path.c_str());
    append_result_rows(path, {a, b});
    const CliResult r = compare(dir, path, path, {"--format", "junit"});
    EXPECT_EQ(r.exit_code, 0) << column << "\n" << r.out << r.err;
    EXPECT_EQ(junit_classnames(r.out).size(), 2u) << column << "\n" << r.out;
  }
  ResultRow row = make_row(Measured{});
  row.set("overlap_grad_reduce", 1);
  row.set("zero", 0);
  const std::string path = dir.file("one.csv");
  append_result_rows(path, {row});
  const CliResult r = compare(dir, path, path);
  EXPECT_NE(r.out.find("\ntrain-small/run/cpu f32 small t=1 p=1 d=1 v=1 b=4 B=8 1f1b recompute=none sg=1 "
                       "overlap_grad_reduce=1\n"),
            std::string::npos)
      << r.out;
}

// A file written before the zero and arch columns existed pairs with today's rows of zero 0, gpt.
TEST(CliCompare, AFileWithoutTheZeroAndArchColumnsPairsWithZeroZeroGpt) {
  TempDir dir;
  std::vector<ResultRow> rows;
  for (const auto& m : baseline_rows()) {
    rows.push_back(make_row(m));
    rows.back().set("zero", 0);
    rows.back().set("arch", std::string("gpt"));
  }
  const std::string cur = dir.file("cur.csv");
  append_result_rows(cur, rows);
  std::ifstream in(cur);
  std::string header, line, old;
  std::getline(in, header);
  const size_t cut = header.find(",zero,arch");
  ASSERT_NE(cut, std::string::npos);
  old = header.substr(0, cut) + "\n";
  // The fields from zero on (zero, arch and the columns after them) cut off each row too.
  const auto cut_fields = std::count(header.begin() + cut, header.end(), ',');
  while (std::getline(in, line)) {
    size_t end = line.size();
    for (int k = 0; k < cut_fields; ++k) end = line.rfind(',', end - 1);
    old += line.substr(0, end) + "\n";
  }
  const CliResult r = compare(dir, write_text(dir, "old.csv", old), cur);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 configuration(s) compared: 2 ok"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ptdp
