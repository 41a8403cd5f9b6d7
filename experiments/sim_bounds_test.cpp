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
