// End-to-end tests of `ptdp compare`'s reports: the labels (from the key columns), JSON keyed by
// the configuration's fields, the overall geomean in every format, any bytes in a label written as
// they are, and JUnit XML valid under the strict Ant JUnit schema (checked by xmllint).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/results_csv.h"
#include "core/data/testing/data_test_util.h"
#include "experiments/testing/cli_runner.h"
#include "experiments/testing/compare_rows.h"

namespace ptdp {
namespace {

using namespace compare_testing;
using testing::IsUsageError;
using testing::write_text;

// xmllint's verdict on an XML file (libxml2-utils, scripts/setup_packages.sh): 0 when it is
// well-formed and, with a schema, valid; its messages are appended to `log`.
int xmllint(const TempDir& dir, const std::string& xml_text, std::string& log, const std::string& schema = "") {
  const std::string path = write_text(dir, "report.xml", xml_text), out = dir.file("xmllint.log");
  const std::string cmd =
      "xmllint --noout " + (schema.empty() ? "" : "--schema '" + schema + "' ") + "'" + path + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  log += testing::text_of(out);
  return rc;
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
  for (const char* needle : {"\"verdict\": \"FAIL\"", "\"exit_code\": 1", "\"regressed\": 1",
                             "\"metric\": \"tokens_per_s\"", "\"change_pct\": -20.0"})
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

}  // namespace
}  // namespace ptdp
