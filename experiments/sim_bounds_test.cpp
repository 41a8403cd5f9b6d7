// Sizes that reach the simulator's loops are bounded: huge batches and interleaving degrees give
// one clear line (or are skipped by the planner) within a second, never a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::source_file;
using testing::TempDir;
using testing::text_of;
using testing::write_text;

// hardware/a100-selene.toml with the value of each {section, key} replaced, written into `dir`.
std::string selene_with(const TempDir& dir,
                        const std::vector<std::tuple<std::string, std::string, std::string>>& edits) {
  std::string text = text_of(source_file("hardware/a100-selene.toml"));
  for (const auto& [section, key, value] : edits) {
    const std::regex re("(\\[" + section + "\\][^\\[]*\n" + key + " = \\{ value = )([^,]+)");
    std::smatch m;
    EXPECT_TRUE(std::regex_search(text, m, re)) << section << "." << key;
    if (!m.empty()) text.replace(size_t(m.position(2)), size_t(m.length(2)), value);
  }
  return write_text(dir, "extreme.toml", text);
}

// simulate gpt-1t at the paper's 3072-GPU layout (Table 1, full recomputation), its row appended to `csv`.
CliResult simulate_gpt_1t(const TempDir& dir, const std::string& profile, const std::string& csv) {
  return run_ptdp(dir,
                  {"simulate", "--hardware", profile, "--model", "gpt-1t", "--tp", "8", "--pp", "64", "--gpus", "3072",
                   "--global-batch", "3072", "--micro-batch", "1", "--recompute", "full", "--csv", csv},
                  60);
}

TEST(SimBounds, AHugeBatchIsRefusedByTheSimulatorAtOnce) {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_ptdp(dir, {"simulate", "--hardware", "a100-selene", "--model", "gpt-1.7b", "--tp", "1",
                                     "--pp", "1", "--gpus", "1", "--global-batch", "2000000000"},
                               30);
  EXPECT_TRUE(IsUsageError(r, {"--global-batch 2000000000", "at most 65536"})) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(SimBounds, ThePlannerSkipsLayoutsBeyondTheBoundAndFinishes) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"plan", "--hardware", "a100-selene", "--model", "gpt-1.7b", "--gpus", "8",
                                     "--global-batch", "2000000"},
                               60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --gpus 2147483647 (a prime: t x p overflowed) ended in SIGFPE after 14-30 s; every count the
// planner takes is bounded, and the largest allowed device count is searched within seconds.
TEST(SimBounds, ThePlannerRefusesCountsBeyondItsBoundsAndSearchesTheLargestQuickly) {
  TempDir dir;
  auto plan = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"plan", "--hardware", "a100-selene", "--model", "gpt-1t"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ptdp(dir, args, 120);
  };
  CliResult r = plan({"--gpus", "2147483647", "--global-batch", "512"});
  EXPECT_TRUE(IsUsageError(r, {"--gpus 2147483647 must be at most 1048576"})) << r.err;
  r = plan({"--gpus", "8", "--global-batch", "2000000000"});
  EXPECT_TRUE(IsUsageError(r, {"--global-batch 2000000000 must be at most 16777216"})) << r.err;
  r = plan({"--gpus", "8", "--global-batch", "64", "--micro-batches", "0"});
  EXPECT_TRUE(IsUsageError(r, {"--micro-batches: 0 must be in [1, 16777216]"})) << r.err;
  const auto t0 = std::chrono::steady_clock::now();
  r = plan({"--gpus", "1048576", "--global-batch", "16777216"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("paper heuristic"), std::string::npos) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

TEST(SimBounds, AHugeMaxVppIsCappedByTheLayersNotLooped) {
  TempDir dir;
  for (const char* v : {"1073741823", "1073741824", "2147483647"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = run_ptdp(dir, {"plan", "--hardware", "a100-selene", "--model", "gpt-1.7b", "--gpus", "8",
                                       "--global-batch", "64", "--max-vpp", v},
                                 60);
    EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << v;
  }
}

// Extreme profile values inside the old ranges made the simulator's times overflow: rows of inf
// and -nan, and `plan` blaming memory. Each is refused naming the file and the key.
TEST(SimBounds, ProfileValuesThatMakeTimesOverflowAreRefused) {
  TempDir dir;
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> cases = {
      {"compute", "peak_tflops_f16", "1e-300", "field 'compute.peak_tflops_f16' = 1e-300 must be 0 or at least 1e-06"},
      {"gemm", "mn_half", "1e300", "field 'gemm.mn_half' = 1e+300 must be at most 1e+15"},
      {"memory", "bandwidth_gbs", "1e-300", "field 'memory.bandwidth_gbs' = 1e-300 must be at least 1e-06"},
      {"nvlink", "latency_us", "1e300", "field 'nvlink.latency_us' = 1e+300 must be at most 1e+09"},
      {"network", "nic_bandwidth_gbs", "1e-300", "field 'network.nic_bandwidth_gbs' = 1e-300 must be at least 1e-06"},
      {"network", "efficiency", "1e-300", "field 'network.efficiency' = 1e-300 must be at least 0.001"},
      {"memory", "allocator_overhead", "1e300", "field 'memory.allocator_overhead' = 1e+300 must be at most 1000"},
  };
  for (const auto& [section, key, value, needle] : cases) {
    const std::string profile = selene_with(dir, {{section, key, value}});
    const std::string csv = dir.file("rows.csv");
    EXPECT_TRUE(IsUsageError(simulate_gpt_1t(dir, profile, csv), {profile + ": " + needle})) << key;
    EXPECT_FALSE(std::filesystem::exists(csv)) << key;
    EXPECT_TRUE(IsUsageError(
        run_ptdp(dir, {"plan", "--hardware", profile, "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "64"},
                 60),
        {profile + ": " + needle}))
        << key;
  }
}

// Every value at the end of its range that makes the times largest (the slowest rates, the
// largest latencies and GEMM half-points) or smallest: every number simulate writes is finite,
// and plan ranks layouts instead of blaming memory.
TEST(SimBounds, EveryProfileValueAtItsBoundGivesFiniteTimes) {
  TempDir dir;
  const std::vector<std::tuple<std::string, std::string, std::string>> slowest = {
      {"compute", "peak_tflops_f16", "1e-6"},
      {"compute", "peak_tflops_bf16", "1e-6"},
      {"compute", "peak_tflops_f32", "1e-6"},
      {"compute", "launch_overhead_us", "1e9"},
      {"gemm", "max_efficiency", "1e-3"},
      {"gemm", "mn_half", "1e15"},
      {"gemm", "k_half", "1e12"},
      {"memory", "capacity_gb", "1e9"},
      {"memory", "bandwidth_gbs", "1e-6"},
      {"memory", "membound_efficiency", "1e-3"},
      {"memory", "allocator_overhead", "1e3"},
      {"nvlink", "p2p_bandwidth_gbs", "1e-6"},
      {"nvlink", "allreduce_busbw_gbs", "1e-6"},
      {"nvlink", "latency_us", "1e9"},
      {"network", "nic_bandwidth_gbs", "1e-6"},
      {"network", "efficiency", "1e-3"},
      {"network", "latency_us", "1e9"}};
  const std::vector<std::tuple<std::string, std::string, std::string>> fastest = {
      {"compute", "peak_tflops_f16", "1e6"},
      {"compute", "launch_overhead_us", "0"},
      {"gemm", "max_efficiency", "1"},
      {"gemm", "mn_half", "0"},
      {"gemm", "k_half", "0"},
      {"memory", "bandwidth_gbs", "1e6"},
      {"memory", "membound_efficiency", "1"},
      {"nvlink", "p2p_bandwidth_gbs", "1e6"},
      {"nvlink", "latency_us", "0"},
      {"nvlink", "allreduce_busbw_gbs", "1e6"},
      {"network", "nic_bandwidth_gbs", "1e6"},
      {"network", "efficiency", "1"},
      {"network", "latency_us", "0"}};
  for (const auto& edits : {slowest, fastest}) {
    const std::string profile = selene_with(dir, edits);
    const std::string csv = dir.file(edits.size() == slowest.size() ? "slowest.csv" : "fastest.csv");
    const CliResult r = simulate_gpt_1t(dir, profile, csv);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string rows = text_of(csv);
    const std::regex not_finite(R"((^|[^a-z_])(-?nan|-?inf)([^a-z_]|$))", std::regex::icase);
    EXPECT_FALSE(std::regex_search(r.out, not_finite)) << r.out;
    EXPECT_FALSE(std::regex_search(rows, not_finite)) << rows;
    const CliResult p = run_ptdp(
        dir, {"plan", "--hardware", profile, "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "64"}, 120);
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    EXPECT_FALSE(std::regex_search(p.out, not_finite)) << p.out;
    EXPECT_EQ(p.err.find("out of memory"), std::string::npos) << p.err;
  }
}

}  // namespace
}  // namespace ptdp
