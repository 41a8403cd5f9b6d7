// `train --eval-iters N [--eval-interval K]`: evaluations on Megatron's valid split (a dataset of
// Megatron-core's fixtures with many documents, core/data/testdata/megatron) and on synthetic data,
// through the command line: every layout equal to one rank, a resumed run evaluating the samples
// the whole run did, Megatron-LM's report and the result row, the bad flags.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
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

// The loss of each " validation at iteration N" line of a run's output, in order, as printed.
std::vector<std::string> validations(const std::string& out) {
  std::vector<std::string> v;
  for (size_t at = out.find(" validation at iteration"); at != std::string::npos;
       at = out.find(" validation at iteration", at + 1)) {
    const size_t from = out.find("| loss ", at) + 7;
    v.push_back(out.substr(from, out.find(' ', from) - from));
  }
  return v;
}

// tiny at h = 16 (2 heads) with mega_a's vocabulary, on its Megatron order, b = 2, B = 8.
CliResult train_mega(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--model", "tiny", "--vocab-size", "65536", "--hidden", "16", "--heads",
                                   "2", "--data-order", "megatron", "--data",
                                   source_file("core/data/testdata/megatron/mega_a"), "--data-cache-path",
                                   dir.file("cache"), "--micro-batch", "2", "--global-batch", "8", "--warmup", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_ptdp(dir, args);
}

TEST(CliEvaluation, EveryLayoutEvaluatesTheValidSplitAsOneRank) {
  TempDir dir;
  const CliResult one = train_mega(dir, {"--iters", "2", "--eval-iters", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("valid: split valid of --split 969,30,1, 8 samples for 1 evaluation(s) of 1 x 8"),
            std::string::npos)
      << one.out;
  EXPECT_NE(one.out.find(" validation at iteration      2 (after training) | loss "), std::string::npos) << one.out;
  const CliResult grid = train_mega(dir, {"--iters", "2", "--eval-iters", "1", "--tp", "2", "--pp", "2", "--dp", "2"});
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  const std::vector<std::string> a = validations(one.out), b = validations(grid.out);
  ASSERT_EQ(a.size(), 1u) << one.out;
  ASSERT_EQ(b.size(), 1u) << grid.out;
  EXPECT_NEAR(std::stod(a[0]), std::stod(b[0]), 2e-5 * std::stod(a[0]));
}

// Megatron-LM's test evaluation: once, after training, eval_iters global batches from the start of
// the test split; the same loss on every layout; none where the split gives the test no share.
TEST(CliEvaluation, TheTestSplitIsEvaluatedOnceAfterTrainingOnEveryLayoutAlike) {
  TempDir dir;
  const std::string key = " test after iteration      2 | loss ";
  auto test_loss = [&](const CliResult& r) {
    const size_t at = r.out.find(key);
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? 0.0 : std::stod(r.out.substr(at + key.size()));
  };
  const CliResult one = train_mega(dir, {"--iters", "2", "--eval-iters", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("test: split test of --split 969,30,1, 8 samples for one evaluation after training"),
            std::string::npos)
      << one.out;
  const CliResult grid = train_mega(dir, {"--iters", "2", "--eval-iters", "1", "--tp", "2", "--pp", "2", "--dp", "2",
                                          "--log-format", "megatron"});
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  const std::string mkey = " validation loss at iteration 2 on test set | lm loss value: ";
  const size_t at = grid.out.find(mkey);
  ASSERT_NE(at, std::string::npos) << grid.out;
  const double a = test_loss(one), b = std::stod(grid.out.substr(at + mkey.size()));
  EXPECT_NEAR(a, b, 2e-5 * a);
  EXPECT_NE(a, std::stod(validations(one.out).at(0)));  // other samples than the valid split's
  const CliResult none = train_mega(dir, {"--iters", "2", "--eval-iters", "1", "--split", "969,31,0"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("test: --split 969,31,0 gives the test split no share: not evaluated"), std::string::npos)
      << none.out;
  EXPECT_EQ(none.out.find(" test after iteration"), std::string::npos) << none.out;
}

// Every 2 iterations of 4: at 2, at 4 and after training, each on the next 8 valid samples
// (Megatron's (4 // 2 + 1) x 1 x 8 = 24). Resumed at 2, the run evaluates at 4 and after training
// on the samples the whole run used there (Megatron's consumed_valid_samples).
TEST(CliEvaluation, AResumedRunEvaluatesTheSamplesTheWholeRunDid) {
  TempDir dir;
  const std::vector<std::string> eval = {"--eval-iters", "1", "--eval-interval", "2"};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), eval.begin(), eval.end());
    return train_mega(dir, args);
  };
  const CliResult whole = run({"--iters", "4"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_NE(whole.out.find("valid: split valid of --split 969,30,1, 24 samples for 3 evaluation(s) of 1 x 8"),
            std::string::npos)
      << whole.out;
  ASSERT_EQ(run({"--iters", "2", "--save", dir.file("ck")}).exit_code, 0);
  const CliResult rest = run({"--iters", "4", "--load", dir.file("ck")});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  const std::vector<std::string> w = validations(whole.out), r = validations(rest.out);
  ASSERT_EQ(w.size(), 3u) << whole.out;
  ASSERT_EQ(r.size(), 2u) << rest.out;
  EXPECT_EQ(r[0], w[1]);
  EXPECT_EQ(r[1], w[2]);
  EXPECT_NE(w[0], w[1]);  // other weights
  EXPECT_NE(w[1], w[2]);  // the same weights, other samples
}

// Synthetic data: the evaluations read another synthetic stream; Megatron-LM's report with
// --log-format megatron; the last evaluation in the result row.
TEST(CliEvaluation, SyntheticDataIsEvaluatedAndTheRowHoldsTheLastEvaluation) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--warmup", "1", "--global-batch", "4",
                                     "--eval-iters", "1", "--eval-interval", "1", "--log-format", "megatron", "--csv",
                                     dir.file("rows.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {" validation loss at iteration 1 | lm loss value: ", " validation loss at iteration 2 | ",
                           " validation loss at iteration 2 on validation set | "})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  // Between two rules one character longer than the line, as Megatron prints it.
  const size_t line = r.out.find(" validation loss at iteration 1 |");
  const size_t len = r.out.find('\n', line) - line;
  ASSERT_GT(line, len + 1);
  EXPECT_EQ(r.out.substr(line - len - 2, len + 1), std::string(len + 1, '-')) << r.out;
  ASSERT_EQ(testing::lines_of(text_of(dir.file("rows.csv"))).size(), 2u);
  const std::map<std::string, std::string> f = testing::last_result_row(dir.file("rows.csv"));
  const double loss = std::stod(f.at("valid_loss"));
  EXPECT_GT(loss, 0);
  EXPECT_NEAR(std::stod(f.at("valid_ppl")), std::exp(loss), 1e-4 * std::exp(loss));
  EXPECT_EQ(f.at("data"), "synthetic");
  EXPECT_EQ(f.at("data_order"), "ptdp");
  EXPECT_EQ(f.at("data_sources"), "");
  const std::string key = " on validation set | lm loss value: ";
  const size_t final_at = r.out.find(key);
  ASSERT_NE(final_at, std::string::npos);
  EXPECT_NEAR(std::stod(r.out.substr(final_at + key.size())), loss, 1e-5 * loss);
  // Without --eval-iters the row leaves both empty.
  ASSERT_EQ(run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--global-batch", "4", "--csv",
                           dir.file("plain.csv")})
                .exit_code,
            0);
  const std::map<std::string, std::string> p = testing::last_result_row(dir.file("plain.csv"));
  EXPECT_EQ(p.at("valid_loss"), "");
  EXPECT_EQ(p.at("valid_ppl"), "");
}

TEST(CliEvaluation, BadFlagsAreRefused) {
  TempDir dir;
  // ptdp's own order of a dataset has no held-out part.
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"train", "--model", "tiny", "--vocab-size", "65536", "--data",
                                          source_file("core/data/testdata/megatron/mega_a"), "--eval-iters", "2"}),
                           {"--eval-iters 2 needs a valid split", "--data-order megatron"}));
  EXPECT_TRUE(IsUsageError(train_mega(dir, {"--eval-iters", "-1"}), {"--eval-iters -1 must not be negative"}));
  EXPECT_TRUE(IsUsageError(train_mega(dir, {"--eval-interval", "2"}), {"--eval-interval 2 needs --eval-iters"}));
  EXPECT_TRUE(IsUsageError(train_mega(dir, {"--split", "100,0,0", "--eval-iters", "1"}),
                           {"--split 100,0,0", "valid split"}));
  // A valid share too small to hold a document of mega_c's few.
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"train", "--model", "tiny", "--vocab-size", "65536", "--data-order",
                                          "megatron", "--data", source_file("core/data/testdata/megatron/mega_c"),
                                          "--data-cache-path", dir.file("cache"), "--split", "99,1,0",
                                          "--eval-iters", "1"}),
                           {"--split 99,1,0: the valid split of", "holds no documents"}));
}

}  // namespace
}  // namespace ptdp
