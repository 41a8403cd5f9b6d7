// --recipe llama: Touvron et al.'s optimizer settings, flags given explicitly winning, and the
// learning rate each iteration runs at (Megatron's schedule: iteration 1 at lr 0 under warm-up).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "experiments/recipe.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

auto given_of(std::set<std::string> flags) {
  return [flags](const char* f) { return flags.count(f) > 0; };
}

TEST(Recipe, LlamaSetsTouvronsOptimizerAndTable2LearningRate) {
  RunConfig r;
  r.iters = 250000;
  apply_recipe("llama", "llama-65b", given_of({}), r);
  EXPECT_DOUBLE_EQ(r.opt.lr.max_lr, 1.5e-4);
  EXPECT_DOUBLE_EQ(r.opt.lr.min_lr, 1.5e-5);
  EXPECT_EQ(r.opt.lr.warmup_iters, 2000);
  EXPECT_EQ(r.opt.lr.decay_iters, 250000);
  EXPECT_DOUBLE_EQ(r.opt.beta1, 0.9);
  EXPECT_DOUBLE_EQ(r.opt.beta2, 0.95);
  EXPECT_DOUBLE_EQ(r.opt.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(r.opt.clip_grad, 1.0);
  RunConfig small;
  small.iters = 10000;
  apply_recipe("llama", "llama-7b", given_of({}), small);
  EXPECT_DOUBLE_EQ(small.opt.lr.max_lr, 3e-4);
}

TEST(Recipe, FlagsGivenExplicitlyWin) {
  RunConfig r;
  r.iters = 100;
  r.opt.lr.max_lr = 2e-3;
  r.opt.lr.warmup_iters = 10;
  r.opt.beta2 = 0.98;
  apply_recipe("llama", "llama-13b", given_of({"--lr", "--lr-warmup-iters", "--adam-beta2"}), r);
  EXPECT_DOUBLE_EQ(r.opt.lr.max_lr, 2e-3);
  EXPECT_DOUBLE_EQ(r.opt.lr.min_lr, 2e-4);  // 10% of the peak that was given
  EXPECT_EQ(r.opt.lr.warmup_iters, 10);
  EXPECT_DOUBLE_EQ(r.opt.beta2, 0.98);
  EXPECT_DOUBLE_EQ(r.opt.weight_decay, 0.1);
}

TEST(Recipe, DefaultChangesNothingAndUnknownNamesAreRefused) {
  RunConfig r, before;
  apply_recipe("default", "llama-7b", given_of({}), r);
  EXPECT_EQ(r.opt.lr.max_lr, before.opt.lr.max_lr);
  EXPECT_EQ(r.opt.beta2, before.opt.beta2);
  EXPECT_THROW(apply_recipe("gpt3", "", given_of({}), r), UsageError);
}

TEST(CliRecipe, ARunShorterThanTheWarmUpIsRefusedNamingTheFlags) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"train", "--model", "llama-tiny", "--recipe", "llama", "--iters", "100"});
  EXPECT_TRUE(IsUsageError(r, {"--recipe llama", "--lr-warmup-iters", "2000"}));
  const CliResult bad = run_ptdp(dir, {"train", "--model", "llama-tiny", "--recipe", "llamma", "--iters", "1"});
  EXPECT_TRUE(IsUsageError(bad, {"--recipe", "llamma"}));
}

// simulate does not run the optimizer: --recipe (an optimizer's settings) is train's flag alone.
TEST(CliRecipe, SimulateRefusesTheRecipeAsTrainsFlag) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"simulate", "--model", "llama-7b", "--hardware", "a100-selene", "--tp", "8",
                                     "--global-batch", "8", "--recipe", "llama"});
  EXPECT_TRUE(IsUsageError(r, {"--recipe is not a flag of ptdp simulate (ptdp train takes it)"}));
}

// The lr column of --loss-log, iteration by iteration: warm-up from 0 (iteration 1 runs at lr 0,
// as in Megatron), the peak at iteration warm-up + 1, cosine down to 10% at the end.
TEST(CliRecipe, LlamaTinyRunsTheScheduleIterationByIteration) {
  TempDir dir;
  const int iters = 12, warmup = 4;
  const double peak = 1e-3;
  const CliResult r = run_ptdp(dir, {"train", "--model", "llama-tiny", "--recipe", "llama", "--iters",
                                     std::to_string(iters), "--lr-warmup-iters", std::to_string(warmup), "--lr", "1e-3",
                                     "--global-batch", "2", "--warmup", "0", "--loss-log", dir.file("loss.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimizer: AdamW lr 0.001 (warm-up 4 iterations, cosine to 0.0001 at iteration 12), "
                       "beta1 0.9 beta2 0.95 eps 1e-08, weight decay 0.1, clip 1"),
            std::string::npos)
      << r.out;
  std::istringstream log(testing::text_of(dir.file("loss.csv")));
  std::string line;
  std::getline(log, line);  // header
  for (int k = 1; k <= iters; ++k) {
    ASSERT_TRUE(std::getline(log, line)) << "iteration " << k;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
    ASSERT_GE(cols.size(), 4u) << line;
    const int n = k - 1;  // optimizer steps completed before iteration k
    const double want = n <= warmup ? peak * n / warmup
                                    : 1e-4 + 0.5 * (std::cos(M_PI * (n - warmup) / double(iters - warmup)) + 1) * 9e-4;
    EXPECT_NEAR(std::stod(cols[3]), want, 1e-12) << "iteration " << k;
  }
}

}  // namespace
}  // namespace ptdp
