// End-to-end tests of `ptdp compare`: rows matched by configuration, exit 1 on a throughput drop
// or a memory rise beyond the tolerance or a missing configuration, 0 otherwise, and a usage
// error naming the file and the line for a malformed CSV.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "core/runtime/results_csv.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

struct Measured {
  std::string model = "small";
  int tp = 1, pp = 1, dp = 1;
  double tflops = 0.136, tokens = 4564, mem = 0.168;
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
  return r;
}

std::string write_rows(const TempDir& dir, const std::string& name, const std::vector<Measured>& rows) {
  const std::string path = dir.file(name);
  std::vector<ResultRow> r;
  for (const auto& m : rows) r.push_back(make_row(m));
  append_result_rows(path, r);
  return path;
}

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  testing::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
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
  EXPECT_NE(r.out.find("2 configuration(s) compared: 2 ok, 0 regressed, 0 missing"), std::string::npos) << r.out;
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

TEST(CliCompare, TheLastRowOfARepeatedConfigurationCounts) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto slow = baseline_rows()[0];
  slow.tokens = 100;
  const auto cur = write_rows(dir, "cur.csv", {slow, baseline_rows()[1], baseline_rows()[0]});
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("has 1 rows repeating an earlier configuration"), std::string::npos) << r.out;
}

TEST(CliCompare, EmptyMetricIsNotCompared) {
  TempDir dir;
  const auto base = write_rows(dir, "base.csv", baseline_rows());
  auto text = testing::text_of(base);
  // Blank the first row's peak_mem_gb in the current file.
  const std::string cur_text = text.replace(text.find(",0.168,"), 7, ",,");
  const auto cur = write_text(dir, "cur.csv", cur_text);
  const CliResult r = compare(dir, base, cur);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("not compared (empty)"), std::string::npos) << r.out;
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
