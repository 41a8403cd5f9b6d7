// Context parallelism from the command line (--context-parallel-size, --cp-comm-type): `train`
// trains the same model as one rank (the same losses), resumes from its checkpoints, sharded ones
// too, and refuses a resume under another context-parallel size naming the flag.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "experiments/testing/cli_resume.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp::cli_context_parallel_test {
namespace {

using testing::CliResult;
using testing::run_ptdp;
using testing::TempDir;

CliResult train_tiny(TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--model", "tiny", "--global-batch", "4", "--micro-batch", "2",
                                   "--warmup", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_ptdp(dir, args);
}

// The loss lines of a --loss-log file after its header.
std::string losses_of(const std::string& path) {
  const std::string t = testing::text_of(path);
  return t.substr(t.find('\n') + 1);
}

// The loss column of a --loss-log file (iteration,loss,...).
std::vector<double> loss_column(const std::string& path) {
  std::vector<double> out;
  std::istringstream in(losses_of(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(std::stod(line.substr(line.find(',') + 1)));
  return out;
}

TEST(CliContextParallel, TrainsTheSameModelAsOneRank) {
  TempDir dir;
  const CliResult one = train_tiny(dir, {"--iters", "3", "--loss-log", dir.file("one.csv")});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  for (const char* comm : {"p2p", "a2a", "allgather"}) {
    const std::string log = dir.file(std::string(comm) + ".csv");
    const CliResult cp = train_tiny(dir, {"--iters", "3", "--context-parallel-size", "2", "--cp-comm-type", comm,
                                          "--tp", "2", "--ranks", "4", "--loss-log", log});
    ASSERT_EQ(cp.exit_code, 0) << cp.err;
    const std::vector<double> a = loss_column(dir.file("one.csv")), b = loss_column(log);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), a.size()) << comm;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << comm << " iteration " << i + 1;
  }
}

// Saved under c = 2 with the distributed optimizer over the data-and-context group (d = 2: four
// files per stage), resumed at iteration 2: the rest repeats the uninterrupted run; under c = 1
// the checkpoint is refused naming --context-parallel-size.
TEST(CliContextParallel, ResumingRepeatsTheRunAndAnotherSizeIsRefused) {
  TempDir dir;
  const std::vector<std::string> layout = {"--context-parallel-size", "2", "--dp", "2", "--ranks", "4", "--zero", "1"};
  auto train = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), layout.begin(), layout.end());
    return train_tiny(dir, extra);
  };
  const testing::ResumedRun run = testing::run_then_resume(dir, train, 4, 2);  // resume at 2
  ASSERT_EQ(run.whole.exit_code, 0) << run.whole.err;
  ASSERT_EQ(run.rest.exit_code, 0) << run.rest.err;
  const std::string w = testing::text_of(run.whole_log), r = losses_of(run.rest_log);
  ASSERT_FALSE(r.empty());
  EXPECT_NE(w.find(r), std::string::npos) << "whole:\n" << w << "resumed:\n" << r;
  const CliResult other = train_tiny(dir, {"--iters", "4", "--load", dir.file("ck"), "--dp", "2", "--ranks", "2",
                                           "--zero", "1"});
  EXPECT_TRUE(testing::IsUsageError(other, {"--context-parallel-size 2, this run has --context-parallel-size 1"}))
      << other.err;
}

}  // namespace
}  // namespace ptdp::cli_context_parallel_test
