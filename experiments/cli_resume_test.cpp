// `ptdp train --load`: what a resume must keep from its checkpoint beyond the layout. The
// learning-rate schedule, as Megatron-LM keeps it (a change refused unless
// --override-opt_param-scheduler or --use-checkpoint-opt_param-scheduler says whose to use), the
// data, its order and split, and the vocabulary padding: each refused in one line naming the flag
// and both values.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::TempDir;
using Args = std::vector<std::string>;

Args resume_tiny(const Args& extra) {
  Args a = {"train", "--model", "tiny", "--warmup", "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A checkpoint of 2 iterations of tiny with `extra`, in DIR/ck.
std::string saved_tiny(const TempDir& dir, const Args& extra = {}) {
  const std::string ck = dir.file("ck");
  Args a = resume_tiny(extra);
  a.insert(a.end(), {"--iters", "2", "--lr", "0.001", "--save", ck});
  const CliResult r = run_ptdp(dir, a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ck;
}

// The lr column of the loss log's last row.
std::string loss_log_lr(const std::string& loss_log) {
  const std::vector<std::string> rows = lines_of(testing::text_of(loss_log));
  if (rows.size() < 2) return "";
  const std::vector<std::string> header = testing::split_csv_line(rows.front()), last = testing::split_csv_line(rows.back());
  for (size_t i = 0; i < header.size() && i < last.size(); ++i)
    if (header[i] == "lr") return last[i];
  return "";
}

TEST(CliResume, AnotherLearningRateIsRefusedNamingBothValues) {
  TempDir dir;
  const std::string ck = saved_tiny(dir);
  const CliResult r = run_ptdp(dir, resume_tiny({"--lr", "0.002", "--iters", "4", "--load", ck}));
  EXPECT_TRUE(IsUsageError(r, {"the checkpoint was saved with --lr 0.001, this run has --lr 0.002",
                               "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"}))
      << r.err;
  for (const Args& other : {Args{"--min-lr", "0.0001"}, Args{"--lr-warmup-iters", "1", "--lr-decay-iters", "3"},
                            Args{"--weight-decay", "0.1"}}) {
    Args a = resume_tiny(other);
    a.insert(a.end(), {"--iters", "4", "--load", ck});
    const CliResult o = run_ptdp(dir, a);
    EXPECT_TRUE(IsUsageError(o, {"the checkpoint was saved with " + other[0]})) << o.err;
  }
}

TEST(CliResume, OverrideTrainsWithThisRunsScheduleAndUseCheckpointWithTheCheckpoints) {
  TempDir dir;
  const std::string ck = saved_tiny(dir);
  const std::string log = dir.file("loss.csv");
  CliResult r = run_ptdp(dir, resume_tiny({"--lr", "0.002", "--iters", "3", "--load", ck, "--override-opt_param-scheduler",
                                    "--loss-log", log}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(loss_log_lr(log), "0.002");
  r = run_ptdp(dir, resume_tiny({"--lr", "0.002", "--iters", "3", "--load", ck, "--use-checkpoint-opt_param-scheduler",
                          "--loss-log", log}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(loss_log_lr(log), "0.001");
  r = run_ptdp(dir, resume_tiny({"--iters", "3", "--load", ck, "--override-opt_param-scheduler",
                          "--use-checkpoint-opt_param-scheduler"}));
  EXPECT_TRUE(IsUsageError(r, {"are both given"})) << r.err;
}

// Byte-level datasets made by `ptdp preprocess`: GPL-3's text, or its first `bytes`.
std::string gpl_prefix(const TempDir& dir, const std::string& name, size_t bytes) {
  const std::string text = testing::text_of("/usr/share/common-licenses/GPL-3").substr(0, bytes);
  testing::write_file(dir.file(name + ".txt"), std::vector<uint8_t>(text.begin(), text.end()));
  const CliResult r = run_ptdp(dir, {"preprocess", "--input", dir.file(name + ".txt"), "--output-prefix",
                                     dir.file(name)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir.file(name);
}

TEST(CliResume, AnotherDatasetOrderOrSplitIsRefused) {
  TempDir dir;
  const std::string a = gpl_prefix(dir, "a", 1 << 20), b = gpl_prefix(dir, "b", 8192);
  const std::string ck = saved_tiny(dir, {"--data", a});
  CliResult r = run_ptdp(dir, resume_tiny({"--data", b, "--iters", "4", "--load", ck}));
  EXPECT_TRUE(IsUsageError(r, {"the checkpoint was saved with --data " + a, "this run has --data " + b})) << r.err;
  r = run_ptdp(dir, resume_tiny({"--data", a, "--data-order", "megatron", "--iters", "4", "--load", ck}));
  EXPECT_TRUE(IsUsageError(r, {"saved with --data-order ptdp, this run has --data-order megatron"})) << r.err;
  r = run_ptdp(dir, resume_tiny({"--iters", "4", "--load", ck}));
  EXPECT_TRUE(IsUsageError(r, {"saved with --data " + a + ", this run has --data synthetic"})) << r.err;
  // The same files named another way (relative to another directory, through a link) resume.
  std::filesystem::create_directory_symlink(std::filesystem::path(a).parent_path(), dir.file("link"));
  r = run_ptdp(dir, resume_tiny({"--data", dir.file("link") + "/a", "--iters", "3", "--load", ck}));
  EXPECT_EQ(r.exit_code, 0) << r.err;

  TempDir dir2;
  const Args megatron = {"--data", a, "--data-order", "megatron", "--data-cache-path", dir2.file("cache")};
  Args split = megatron;
  split.insert(split.end(), {"--split", "90,5,5"});
  const std::string ck2 = saved_tiny(dir2, split);
  split = resume_tiny(megatron);
  split.insert(split.end(), {"--split", "80,10,10", "--iters", "4", "--load", ck2});
  r = run_ptdp(dir2, split);
  EXPECT_TRUE(IsUsageError(r, {"saved with --split 90,5,5, this run has --split 80,10,10"})) << r.err;
}

TEST(CliResume, AnotherVocabularyPaddingIsNamed) {
  TempDir dir;
  const std::string ck = saved_tiny(dir, {"--vocab-size", "300", "--make-vocab-size-divisible-by", "64"});
  const CliResult r = run_ptdp(dir, resume_tiny({"--vocab-size", "300", "--iters", "4", "--load", ck}));
  EXPECT_TRUE(IsUsageError(r, {"--make-vocab-size-divisible-by 64, this run has --make-vocab-size-divisible-by 128"}))
      << r.err;
}

}  // namespace
}  // namespace ptdp
