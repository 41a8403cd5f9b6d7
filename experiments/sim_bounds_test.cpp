// Sizes that reach the simulator's loops are bounded: huge batches and interleaving degrees give
// one clear line (or are skipped by the planner) within a second, never a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

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

}  // namespace
}  // namespace ptdp
