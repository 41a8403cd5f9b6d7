// Output locations of `ptdp train` and `ptdp accept`: checked before any work, never replaced
// when they are the user's (symlinks written through), refused at once when they are not regular
// files, and empty path values refused instead of read as "none".
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

std::vector<std::string> tiny(std::vector<std::string> extra) {
  std::vector<std::string> a = {"train", "--model", "tiny", "--iters", "3", "--warmup", "1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliOutputs, EmptyPathValuesAreRefused) {
  TempDir dir;
  for (const char* flag : {"--csv", "--save", "--load", "--loss-log", "--save-init"}) {
    const CliResult r = run_ptdp(dir, tiny({flag, ""}));
    EXPECT_TRUE(IsUsageError(r, {flag, "needs a value"})) << flag << ": " << r.err;
  }
}

TEST(CliOutputs, ControlCharactersInTheExperimentNameAreRefused) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, tiny({"--experiment", "a\nb", "--csv", dir.file("r.csv")}));
  EXPECT_TRUE(IsUsageError(r, {"--experiment", "control characters"})) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.csv")));
}

TEST(CliOutputs, UnusableLossLogAndSaveAreRefusedBeforeTraining) {
  TempDir dir;
  const std::string file = dir.file("plain");
  testing::write_file(file, {'x'});
  for (const auto& args : std::vector<std::vector<std::string>>{{"--loss-log", dir.file("missing/loss.csv")},
                                                                {"--loss-log", "/dev/null"},
                                                                {"--save", file + "/ckpt"},
                                                                {"--save", "/proc/ptdp-ckpt"}}) {
    const CliResult r = run_ptdp(dir, tiny(args));
    EXPECT_TRUE(IsUsageError(r, {args[0]})) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_EQ(r.out.find("iteration"), std::string::npos) << "trained before refusing: " << r.out;
  }
}

TEST(CliOutputs, CsvThatIsAFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("rows.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const CliResult r = run_ptdp(dir, tiny({"--csv", fifo}), 30);
  EXPECT_TRUE(IsUsageError(r, {"--csv", "not a regular file"})) << r.err;
}

TEST(CliOutputs, LossLogThroughASymlinkReachesTheTargetWhichKeepsItsMode) {
  TempDir dir;
  const std::string target = dir.file("loss.csv"), link = dir.file("link.csv");
  testing::write_file(target, {'o', 'l', 'd', '\n'});
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  std::filesystem::create_symlink(target, link);
  const CliResult r = run_ptdp(dir, tiny({"--loss-log", link}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  const std::string text = testing::text_of(target);
  EXPECT_EQ(text.rfind("iteration,loss", 0), 0u) << text;
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(CliOutputs, ResultCsvThroughASymlinkReachesTheTarget) {
  TempDir dir;
  const std::string target = dir.file("rows.csv"), link = dir.file("link.csv");
  std::filesystem::create_symlink(target, link);
  ASSERT_EQ(run_ptdp(dir, tiny({"--csv", link})).exit_code, 0);
  ASSERT_EQ(run_ptdp(dir, tiny({"--csv", link})).exit_code, 0);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  const std::string text = testing::text_of(target);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;  // header and two rows
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Inputs that are FIFOs would block the reader forever: refused at once.
TEST(CliInputs, FifoInputsAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("in.csv");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  CliResult r = run_ptdp(dir, {"compare", fifo, fifo}, 30);
  EXPECT_TRUE(IsUsageError(r, {"in.csv", "not a regular file"})) << r.err;
  const std::string prefix = dir.file("data");
  ASSERT_EQ(::mkfifo((prefix + ".idx").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((prefix + ".bin").c_str(), 0644), 0);
  r = run_ptdp(dir, tiny({"--data", prefix}), 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Settings that used to be changed silently.
TEST(CliSettings, ADecayEndingInsideTheWarmupIsRefused) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, tiny({"--lr-decay-iters", "5", "--lr-warmup-iters", "10"}));
  EXPECT_TRUE(IsUsageError(r, {"--lr-decay-iters 5 must be more than --lr-warmup-iters 10"})) << r.err;
}

TEST(CliSettings, AHysteresisTheCheckpointCannotHoldIsRefused) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, tiny({"--precision", "f16", "--hysteresis", "3000000000"}));
  EXPECT_TRUE(IsUsageError(r, {"--hysteresis 3000000000"})) << r.err;
}

// --grad-bucket-size 1 made two iterations of the tiny model at --dp 2 take over a minute (one
// collective per element): buckets below 1024 elements are refused, naming the bound.
TEST(CliSettings, AGradientBucketOfAFewElementsIsRefused) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, tiny({"--dp", "2", "--grad-bucket-size", "1"}));
  EXPECT_TRUE(IsUsageError(r, {"--grad-bucket-size 1 must be at least 1024 elements"})) << r.err;
}

TEST(CliSettings, AnF32CheckpointResumedInF16StartsAtTheInitialLossScale) {
  TempDir dir;
  const std::string ck = dir.file("ck");
  ASSERT_EQ(run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--warmup", "1", "--save", ck}).exit_code, 0);
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--iters", "4", "--warmup", "1", "--load", ck,
                                     "--precision", "f16", "--initial-loss-scale", "1024"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("saved without dynamic loss scaling; f16 starts at --initial-loss-scale 1024"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("loss scale 1 "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

TEST(CliOutputs, PathsTooLongForTheKernelAreRefusedBeforeTraining) {
  TempDir dir;
  const std::string longname = dir.file(std::string(5000, 'a') + ".csv");
  for (const char* flag : {"--csv", "--loss-log"}) {
    const CliResult r = run_ptdp(dir, tiny({flag, longname}));
    EXPECT_TRUE(IsUsageError(r, {flag, "characters long"})) << flag << ": " << r.err;
    EXPECT_EQ(r.out.find("iteration"), std::string::npos) << r.out;
    EXPECT_LT(r.err.size(), 400u) << "the whole path printed";
  }
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// --csv and --loss-log naming one file: the loss log, written at the end, replaced every result
// row the file held. Refused before training, directly, through a symlink or a hard link.
TEST(CliOutputs, TwoOutputsNamingOneFileAreRefusedAndTheRowsKept) {
  TempDir dir;
  const std::string csv = dir.file("rows.csv"), link = dir.file("link.csv"), hard = dir.file("hard.csv");
  ASSERT_EQ(run_ptdp(dir, tiny({"--csv", csv})).exit_code, 0);
  const std::string rows = testing::text_of(csv);
  std::filesystem::create_symlink(csv, link);
  std::filesystem::create_hard_link(csv, hard);
  for (const std::string& log : {csv, link, hard}) {
    const CliResult r = run_ptdp(dir, tiny({"--csv", csv, "--loss-log", log}));
    EXPECT_TRUE(IsUsageError(r, {"--loss-log " + log + " names the same file as --csv " + csv})) << r.err;
    EXPECT_EQ(testing::text_of(csv), rows);
  }
}

// `accept --out X.json` writes its CSV report to X.csv, a file the user did not name: one that
// is not a report of ptdp accept is refused (before anything is measured), not replaced.
TEST(CliOutputs, AcceptDoesNotReplaceAFileBesideItsReportThatIsNoReport) {
  TempDir dir;
  const std::string json = dir.file("report.json"), csv = dir.file("report.csv");
  testing::write_file(csv, {'m', 'y', ',', 'd', 'a', 't', 'a', '\n'});
  CliResult r = run_ptdp(dir, {"accept", "--hardware", "cpu", "--quick", "--out", json});
  EXPECT_TRUE(IsUsageError(r, {"--out " + json + ": its CSV report " + csv + " exists and is not a report"})) << r.err;
  EXPECT_EQ(testing::text_of(csv), "my,data\n");
  EXPECT_FALSE(std::filesystem::exists(json));
  std::filesystem::remove(csv);
  std::filesystem::create_symlink(json, csv);  // the two reports would be one file
  r = run_ptdp(dir, {"accept", "--hardware", "cpu", "--quick", "--out", json});
  EXPECT_TRUE(IsUsageError(r, {"names the same file as --out " + json})) << r.err;
  const std::string other = dir.file("other.json");
  r = run_ptdp(dir, {"accept", "--hardware", "cpu", "--quick", "--out", other, "--write-golden", other});
  EXPECT_TRUE(IsUsageError(r, {"--write-golden " + other + " names the same file as --out " + other})) << r.err;
}

}  // namespace
}  // namespace ptdp
