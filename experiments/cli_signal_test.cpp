// SIGINT and SIGTERM during `ptdp train`: the run stops after the iteration in progress, writes
// the loss log, the result row and (with --save) a checkpoint of what it reached, says so and
// exits 130 or 143; a second signal stops it at once.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliProcess;
using testing::CliResult;
using testing::start_ptdp;
using testing::TempDir;
using testing::text_of;
using testing::wait_ptdp;

// Waits until the process's stdout contains `needle` (false after 60 s).
bool wait_for_output(const CliProcess& p, const std::string& needle) {
  for (int i = 0; i < 600; ++i) {
    if (text_of(p.out_path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

size_t line_count(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

std::vector<std::string> long_run(const TempDir& dir) {
  return {"train",      "--model", "tiny",           "--tp",   "2",  "--iters", "1000000", "--warmup",
          "2",          "--loss-log", dir.file("loss.csv"), "--csv", dir.file("rows.csv"), "--save", dir.file("ck")};
}

TEST(CliSignal, SigintStopsAfterTheIterationAndWritesWhatWasMeasured) {
  TempDir dir;
  const CliProcess p = start_ptdp(dir, long_run(dir));
  ASSERT_TRUE(wait_for_output(p, "iteration      5/1000000"));
  ::kill(p.pid, SIGINT);
  const CliResult r = wait_ptdp(p);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("SIGINT: stopping after the iteration in progress"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("stopped by SIGINT after iteration"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ptdp: stopped by a signal after iteration"), std::string::npos) << r.err;
  // The loss log holds every iteration reached, the result row is there, and the checkpoint of
  // the last iteration loads.
  const std::string after = r.out.substr(r.out.find("stopped by SIGINT after iteration ") + 34);
  const int reached = std::stoi(after);
  EXPECT_GE(reached, 5);
  EXPECT_EQ(line_count(text_of(dir.file("loss.csv"))), size_t(reached) + 1);
  const std::string rows = text_of(dir.file("rows.csv"));
  EXPECT_EQ(line_count(rows), 2u) << rows;
  EXPECT_EQ(text_of(dir.file("ck/latest_checkpointed_iteration.txt")), std::to_string(reached) + "\n");
}

TEST(CliSignal, ASecondSignalStopsAtOnce) {
  TempDir dir;
  // A step long enough that the second signal arrives inside it.
  std::vector<std::string> args = long_run(dir);
  args.insert(args.end(), {"--layers", "8", "--hidden", "512", "--heads", "8", "--seq-length", "256"});
  const CliProcess p = start_ptdp(dir, args);
  ASSERT_TRUE(wait_for_output(p, "iteration      1/1000000"));
  ::kill(p.pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(p.pid, SIGTERM);
  const CliResult r = wait_ptdp(p);
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_NE(r.err.find("SIGTERM again: stopping at once"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptdp
