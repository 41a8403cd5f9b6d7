// End-to-end tests of `ptdp accept` with the GPU profiles (hardware/h100-dgx-accept.toml,
// hardware/h200-accept.toml): every threshold has a value and a source; the profile is read in
// full before anything looks for a GPU; without a GPU the run is refused with one line and
// writes nothing. With a GPU: a --quick run reports every check (SKIP for the communication
// checks on one GPU) and its training check passes; --write-golden records CUDA losses that the
// train check then matches. GPU tests skip with the reason when no device is present.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/data/testing/data_test_util.h"
#include "core/results/csv_reader.h"
#include "experiments/testing/cli_runner.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::source_file;
using testing::split_csv_line;
using testing::TempDir;
using testing::text_of;
using testing::write_text;

namespace fs = std::filesystem;

const std::vector<std::string> kGpuProfiles = {"a100", "h100-dgx", "h200"};

// The number of GPUs here; 0 with the reason in `why`.
int gpus_here(std::string* why) {
#ifdef PTDP_HAVE_CUDA
  return cuda::device_count(why);
#else
  *why = "this build has no CUDA backend";
  return 0;
#endif
}

// The report's CSV rows by check name: {status, value, threshold, detail}.
std::map<std::string, std::vector<std::string>> report_rows(const std::string& csv) {
  std::map<std::string, std::vector<std::string>> rows;
  const auto lines = lines_of(text_of(csv));
  EXPECT_FALSE(lines.empty());
  const auto header = split_csv_line(lines.at(0));
  EXPECT_EQ(header.at(6), "status");
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    EXPECT_EQ(f.size(), header.size()) << lines[i];
    rows[f.at(0)] = {f.at(6), f.at(2), f.at(5), f.at(7)};
  }
  return rows;
}

// ---- the profiles (no GPU needed)

TEST(CliAcceptGpu, GpuProfilesHaveEveryThresholdWithAValueAndASource) {
  const std::vector<std::string> thresholds = {"accept.gemm.min_tflops",          "accept.memory.min_add_gbs",
                                               "accept.allreduce.min_busbw_gbs",   "accept.p2p.min_bandwidth_gbs",
                                               "accept.train.max_rel_error",       "accept.train.max_rel_error_vs_cpu",
                                               "accept.fleet.min_allreduce_busbw_gbs_per_nic",
                                               "accept.fleet.min_p2p_gbs"};
  for (const std::string& name : kGpuProfiles) {
    SCOPED_TRACE(name);
    const toml::table t = toml::parse_file(source_file("hardware/" + name + "-accept.toml"));
    EXPECT_EQ(t["name"].value_or(std::string()), name);
    EXPECT_EQ(t["kind"].value_or(std::string()), "gpu");
    EXPECT_GE(t.at_path("node.gpus").value_or(int64_t(0)), 1);
    EXPECT_GE(t.at_path("node.nics").value_or(int64_t(0)), 1);  // a fleet judges the links between nodes too
    for (const std::string& field : thresholds) {
      const toml::table* th = t.at_path(field).as_table();
      ASSERT_NE(th, nullptr) << field;
      EXPECT_GT((*th)["value"].value_or(0.0), 0.0) << field;
      const std::string source = (*th)["source"].value_or(std::string());
      EXPECT_FALSE(source.empty()) << field;
      // Rates are lower bounds from datasheet numbers until a GPU run measures them, then measured
      // values: the source says which.
      if (field.find("max_rel_error") == std::string::npos || field.ends_with("_vs_cpu")) {
        EXPECT_TRUE(source.rfind("not measured here: ", 0) == 0 || source.rfind("measured: ", 0) == 0)
            << field << ": " << source;
      }
    }
    EXPECT_TRUE(fs::exists(source_file(t.at_path("accept.train.cpu_golden").value_or(std::string()))));
    EXPECT_EQ(t.at_path("accept.train.golden").value_or(std::string()), "results/golden/tiny_cuda.csv");
  }
}

TEST(CliAcceptGpu, GpuProfileIsReadInFullBeforeLookingForAGpu) {
  TempDir dir;
  std::string text = text_of(source_file("hardware/h100-dgx-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(min_add_gbs = [^\n]*\n)"), "");
  const std::string profile = write_text(dir, "p.toml", text);
  const std::string out = dir.file("r.json");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", profile, "--out", out}),
                           {profile, "'accept.memory.min_add_gbs' is missing"}));
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliAcceptGpu, GpuThresholdWithoutSourceIsRefused) {
  TempDir dir;
  std::string text = text_of(source_file("hardware/h200-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(min_tflops = [^\n]*\n)"), "min_tflops = { value = 500 }\n");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", write_text(dir, "p.toml", text)}),
                           {"'accept.gemm.min_tflops' has no source"}));
}

// ---- no GPU here: one line, exit code 2, no report

TEST(CliAcceptGpu, GpuProfileWithoutAGpuIsRefusedWithOneLineAndNoReport) {
  std::string why;
  if (gpus_here(&why) > 0) GTEST_SKIP() << "a GPU is present: the refusal cannot happen here";
  for (const std::string& name : kGpuProfiles) {
    SCOPED_TRACE(name);
    TempDir dir;
    const std::string out = dir.file("r.json");
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", name, "--out", out}),
                             {"--hardware " + name + ": a GPU acceptance profile (", "no GPU here (" + why}));
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(dir.file("r.csv")));
    const std::string golden = dir.file("golden.csv");
    EXPECT_TRUE(IsUsageError(
        run_ptdp(dir, {"accept", "--hardware", name, "--checks", "train", "--write-golden", golden}),
        {"no GPU here"}));
    EXPECT_FALSE(fs::exists(golden));
  }
}

// ---- on a GPU

// The profile for this machine's GPU 0: a100 for an A100, h200 for an H200, h100-dgx otherwise.
std::string profile_for_this_gpu() {
#ifdef PTDP_HAVE_CUDA
  const std::string name = cuda::device_name(0);
  if (name.find("vgpu") != std::string::npos) return "vgpu";  // the virtual GPU of the test build
  if (name.find("A100") != std::string::npos) return "a100";
  return name.find("H200") != std::string::npos ? "h200" : "h100-dgx";
#else
  return "h100-dgx";
#endif
}

// Rates are not asserted (benchmarks measure, tests assert): each check must be reported with a
// status, the communication checks SKIP exactly when one GPU is visible, and the training check
// (numbers, not speed) must pass.
// The acceptance flow is under test here, not the kernels: the ptdp these tests start runs without
// the virtual GPU's per-access kernel checks (the kernel tests run with them), at half the time.
void without_vgpu_access_checks() { ::setenv("VGPU_ACCESS_CHECK", "0", 1); }

TEST(CliAcceptGpu, QuickRunReportsEveryCheckAndTrainsWithinTolerance) {
  without_vgpu_access_checks();
  std::string why;
  const int gpus = gpus_here(&why);
  if (gpus == 0) GTEST_SKIP() << "no GPU: " << why;
  TempDir dir;
  const std::string out = dir.file("accept.json");
  const CliResult r = run_ptdp(dir, {"accept", "--hardware", profile_for_this_gpu(), "--quick", "--out", out}, 600);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
  const auto rows = report_rows(dir.file("accept.csv"));
  for (const char* check : {"gemm", "memory", "allreduce", "p2p", "train"}) {
    ASSERT_TRUE(rows.count(check)) << check << "\n" << r.out;
    const std::string status = rows.at(check)[0];
    EXPECT_TRUE(status == "PASS" || status == "FAIL" || status == "SKIP") << check << ": " << status;
  }
  EXPECT_NE(rows.at("gemm")[0], "SKIP");
  EXPECT_NE(rows.at("memory")[0], "SKIP");
  EXPECT_EQ(rows.at("train")[0], "PASS") << rows.at("train")[3];
  for (const char* check : {"allreduce", "p2p"}) {
    EXPECT_EQ(rows.at(check)[0] == "SKIP", gpus == 1) << check << ": " << rows.at(check)[3];
    if (gpus == 1) {
      EXPECT_EQ(rows.at(check)[1], "") << check;  // nothing measured
      EXPECT_NE(rows.at(check)[3].find("1 GPU visible"), std::string::npos) << rows.at(check)[3];
    }
  }
  EXPECT_NE(rows.at("gemm")[3].find("; 0 of "), std::string::npos) << rows.at("gemm")[3];  // sampled entries wrong
  EXPECT_NE(rows.at("memory")[3].find("; 0 wrong elements"), std::string::npos) << rows.at("memory")[3];
  const std::string json = text_of(out);
  EXPECT_NE(json.find(r.exit_code == 0 ? "\"passed\": true" : "\"passed\": false"), std::string::npos) << json;
  if (gpus == 1) {
    EXPECT_NE(r.out.find("; 2 skipped: allreduce, p2p)"), std::string::npos) << r.out;
  }
}

TEST(CliAcceptGpu, WriteGoldenRecordsCudaLossesThatTheTrainCheckMatches) {
  without_vgpu_access_checks();
  std::string why;
  if (gpus_here(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  TempDir dir;
  const std::string golden = dir.file("tiny_cuda.csv");
  std::string text = text_of(source_file("hardware/" + profile_for_this_gpu() + "-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(\ngolden = "[^"]*")"), "\ngolden = \"" + golden + "\"");
  const std::string profile = write_text(dir, "p.toml", text);
  const CliResult r = run_ptdp(dir, {"accept", "--hardware", profile, "--checks", "train", "--write-golden", golden}, 300);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ACCEPT: PASS (1 of 1 checks)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("against " + golden + ";"), std::string::npos) << r.out;  // its own file, not the CPU one
  EXPECT_EQ(CsvTable::read(golden, {"iteration", "loss"}).size(), 20u);
}

}  // namespace
}  // namespace ptdp
