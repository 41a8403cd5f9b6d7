// Uneven pipeline stages from the command line (Megatron-core's --decoder-first-pipeline-num-layers
// and --decoder-last-pipeline-num-layers): `train` places the layers so, trains the same model as
// the even split (same losses), records the split and resumes from checkpoints under it; `simulate` models it; a split that does
// not work is refused naming the flags.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "experiments/testing/cli_resume.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::run_ptdp;
using testing::TempDir;

// `ptdp train` of tiny with 6 layers, 3 iterations and `extra`; its result row.
std::map<std::string, std::string> train_tiny6(TempDir& dir, const std::string& csv, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--model", "tiny", "--layers", "6", "--iters", "3", "--csv", dir.file(csv)};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_ptdp(dir, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return testing::last_result_row(dir.file(csv));
}

// `ptdp simulate` of GPT-3 175B on 1536 A100s at t = 8, p = 12 with `extra`: what it printed and its row.
std::pair<std::string, std::map<std::string, std::string>> simulate_175b(TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"simulate", "--hardware", "a100-selene", "--model", "gpt3-175b", "--gpus", "1536",
                                   "--tp", "8", "--pp", "12", "--global-batch", "1536", "--recompute", "full",
                                   "--csv", dir.file("sim.csv")};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_ptdp(dir, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return {r.out, testing::last_result_row(dir.file("sim.csv"))};
}

TEST(CliUneven, TrainPlacesTheLayersAsAskedAndTrainsTheSameModel) {
  TempDir dir;
  auto train = [&](const std::string& csv, std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--pp", "2"});
    return train_tiny6(dir, csv, extra);
  };
  const auto even = train("even.csv", {});
  EXPECT_EQ(even.at("stage_layers"), "");
  const auto first = train("first.csv", {"--decoder-first-pipeline-num-layers", "1"});
  EXPECT_EQ(first.at("stage_layers"), "1:0");
  const auto last = train("last.csv", {"--decoder-last-pipeline-num-layers", "5"});
  EXPECT_EQ(last.at("stage_layers"), "0:5");
  for (const auto* row : {&first, &last})
    EXPECT_NEAR(std::stod(row->at("loss")), std::stod(even.at("loss")), 1e-5 * std::stod(even.at("loss")));
  // Only the placement differs: `compare` sees two configurations.
  const CliResult c = run_ptdp(dir, {"compare", dir.file("even.csv"), dir.file("first.csv")});
  EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
  EXPECT_NE(c.out.find("missing"), std::string::npos) << c.out;
}

// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: the same model
// trained (same losses as the even split), interleaved with chunks of unequal size; `simulate`
// places 94 layers + both over 12 stages as the explicit 7 | 8 x 10 | 7 and times them alike.
TEST(CliUneven, TheEmbeddingAndTheLossCountedAsLayers) {
  TempDir dir;
  auto train = [&](const std::string& csv, std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--global-batch", "4"});
    return train_tiny6(dir, csv, extra);
  };
  const auto plain = train("plain.csv", {});
  const auto counted = train("counted.csv", {"--pp", "2", "--vpp", "2", "--schedule", "interleaved",
                                              "--account-for-embedding-in-pipeline-split",
                                              "--account-for-loss-in-pipeline-split"});
  EXPECT_EQ(plain.at("stage_layers"), "");
  EXPECT_EQ(counted.at("stage_layers"), "embedding+loss");
  EXPECT_NEAR(std::stod(counted.at("loss")), std::stod(plain.at("loss")), 1e-5 * std::stod(plain.at("loss")));

  auto sim = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--layers", "94"});
    return simulate_175b(dir, extra);
  };
  const auto [explicit_out, explicit_row] = sim({"--decoder-first-pipeline-num-layers", "7",
                                                 "--decoder-last-pipeline-num-layers", "7"});
  const auto [counted_out, counted_row] = sim({"--account-for-embedding-in-pipeline-split",
                                               "--account-for-loss-in-pipeline-split"});
  EXPECT_NE(counted_out.find("(layers per stage 7 | 8 x 10 | 7)"), std::string::npos) << counted_out;
  EXPECT_EQ(counted_row.at("iter_time_ms"), explicit_row.at("iter_time_ms"));
  EXPECT_EQ(counted_row.at("peak_mem_gb"), explicit_row.at("peak_mem_gb"));

  const CliResult both = run_ptdp(dir, {"train", "--model", "tiny", "--layers", "6", "--pp", "2",
                                        "--account-for-embedding-in-pipeline-split",
                                        "--decoder-first-pipeline-num-layers", "2"});
  EXPECT_TRUE(testing::IsUsageError(both, {"cannot be combined with --decoder-first-pipeline-num-layers"}));
  const CliResult odd = run_ptdp(dir, {"train", "--model", "tiny", "--layers", "6", "--pp", "2",
                                       "--account-for-loss-in-pipeline-split"});
  EXPECT_TRUE(testing::IsUsageError(odd, {"--pp 2 must divide --layers 6 + 1 (the loss counted as a layer by "
                                          "--account-for-loss-in-pipeline-split) = 7"}));
}

// --pipeline-model-parallel-layout: the same model trained, the layout recorded in one spelling and
// in checkpoints; `simulate` times the 94-layer layout as the explicit 7 | 8 x 10 | 7.
TEST(CliUneven, APipelineLayoutPlacesEachVirtualStagesLayers) {
  TempDir dir;
  const std::vector<std::string> layout = {"--pp", "2", "--schedule", "interleaved", "--global-batch", "4",
                                           "--pipeline-model-parallel-layout", "Et|(tt|)*2,tL"};
  const auto plain = train_tiny6(dir, "plain.csv", {"--global-batch", "4"});
  auto with_save = layout;
  with_save.insert(with_save.end(), {"--save", dir.file("ck"), "--save-interval", "2"});
  const auto placed = train_tiny6(dir, "layout.csv", with_save);
  EXPECT_EQ(placed.at("vpp"), "2");
  EXPECT_EQ(placed.at("stage_layers"), "E1|2|2|1L");
  EXPECT_NEAR(std::stod(placed.at("loss")), std::stod(plain.at("loss")), 1e-5 * std::stod(plain.at("loss")));
  // Another layout of the same stage sizes does not load the checkpoint.
  const CliResult other = run_ptdp(dir, {"train", "--model", "tiny", "--layers", "6", "--iters", "4", "--pp", "2",
                                         "--schedule", "interleaved", "--global-batch", "4",
                                         "--pipeline-model-parallel-layout", "Ett|t|t|ttL", "--load", dir.file("ck")});
  EXPECT_TRUE(testing::IsUsageError(
      other, {"was saved with --pipeline-model-parallel-layout E1|2|2|1L, this run has --pipeline-model-parallel-layout E2|1|1|2L"}));
  const CliResult same = run_ptdp(dir, {"train", "--model", "tiny", "--layers", "6", "--iters", "4", "--pp", "2",
                                        "--schedule", "interleaved", "--global-batch", "4",
                                        "--pipeline-model-parallel-layout", "Et|tt,|tt|tL", "--load", dir.file("ck")});
  EXPECT_EQ(same.exit_code, 0) << same.err;

  auto sim = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--layers", "94"});
    return simulate_175b(dir, extra);
  };
  const auto [explicit_out, explicit_row] = sim({"--decoder-first-pipeline-num-layers", "7",
                                                 "--decoder-last-pipeline-num-layers", "7"});
  const auto [layout_out, layout_row] = sim({"--pipeline-model-parallel-layout", "Et*7|(t*8|)*10,t*7L"});
  EXPECT_NE(layout_out.find("(layers per stage 7 | 8 x 10 | 7)"), std::string::npos) << layout_out;
  EXPECT_EQ(layout_row.at("iter_time_ms"), explicit_row.at("iter_time_ms"));

  for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--pp", "2", "--pipeline-model-parallel-layout", "Et|tt|tt|tL"}, "it needs --schedule interleaved"},
           {{"--pp", "2", "--vpp", "3", "--schedule", "interleaved", "--pipeline-model-parallel-layout", "Et|tt|tt|tL"},
            "--vpp 3 disagrees with --pipeline-model-parallel-layout 'Et|tt|tt|tL'"},
           {{"--pp", "2", "--pipeline-model-parallel-layout", "Ett|ttL"}, "holds 4 transformer layers (t), --layers is 6"},
       }) {
    std::vector<std::string> full = {"train", "--model", "tiny", "--layers", "6"};
    full.insert(full.end(), args.begin(), args.end());
    const CliResult r = run_ptdp(dir, full);
    EXPECT_TRUE(testing::IsUsageError(r, {needle}));
  }
}

TEST(CliUneven, ABadSplitIsRefusedNamingTheFlags) {
  TempDir dir;
  auto refused = [&](std::vector<std::string> args, const std::string& needle) {
    const CliResult r = run_ptdp(dir, args);
    EXPECT_TRUE(testing::IsUsageError(r, {needle}));
  };
  refused({"train", "--model", "tiny", "--layers", "6", "--pp", "3", "--decoder-first-pipeline-num-layers", "1"},
          "the 5 layers left after the first and last stages must divide evenly over the other 2 stage(s)");
  refused({"train", "--model", "tiny", "--layers", "6", "--decoder-first-pipeline-num-layers", "2"}, "need --pp >= 2");
  refused({"simulate", "--hardware", "a100-selene", "--model", "gpt3-175b", "--gpus", "96", "--tp", "8", "--pp", "12",
           "--decoder-first-pipeline-num-layers", "7"},
          "--decoder-first-pipeline-num-layers 7");
}

// A checkpoint records each stage's layers: a run resumed under the same split repeats the rest of
// the uninterrupted run loss for loss; under another split (or the even one) it is refused, naming
// the flags and both placements.
TEST(CliUneven, ResumingRepeatsTheRunAndAnotherSplitIsRefused) {
  TempDir dir;
  auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--model", "tiny", "--layers", "6", "--pp", "3", "--global-batch", "4",
                                     "--warmup", "0", "--decoder-first-pipeline-num-layers", "1",
                                     "--decoder-last-pipeline-num-layers", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ptdp(dir, args);
  };
  const testing::ResumedRun run = testing::run_then_resume(dir, train, 6, 3);  // resume at 3
  ASSERT_EQ(run.whole.exit_code, 0) << run.whole.err;
  ASSERT_EQ(run.rest.exit_code, 0) << run.rest.err;
  const std::string w = testing::text_of(run.whole_log), r = testing::text_of(run.rest_log);
  const size_t header = r.find('\n') + 1;
  ASSERT_GT(r.size(), header);
  EXPECT_NE(w.find(r.substr(header)), std::string::npos) << "whole:\n" << w << "resumed:\n" << r;
  const CliResult even = run_ptdp(dir, {"train", "--model", "tiny", "--layers", "6", "--pp", "3", "--global-batch", "4",
                                        "--iters", "6", "--load", dir.file("ck")});
  EXPECT_TRUE(testing::IsUsageError(
      even, {"layers per stage (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers) 1 | 4 | 1, "
             "this run has layers per stage (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers) "
             "2 | 2 | 2"}));
}

// 94 layers over 12 stages (7 | 8 x 10 | 7) is what an even split cannot express; the model
// times each stage by its own layers, so the first-heavy split of 96 layers is slower than the
// even one (its first stage bounds the pipeline).
TEST(CliUneven, SimulateTimesEachStageByItsLayers) {
  TempDir dir;
  auto sim = [&](std::vector<std::string> extra) { return simulate_175b(dir, extra); };
  const auto [even_out, even] = sim({});
  const auto [odd_out, odd] = sim({"--layers", "94", "--decoder-first-pipeline-num-layers", "7",
                                   "--decoder-last-pipeline-num-layers", "7"});
  EXPECT_NE(odd_out.find("(layers per stage 7 | 8 x 10 | 7)"), std::string::npos) << odd_out;
  EXPECT_EQ(odd.at("stage_layers"), "7:7");
  const auto [heavy_out, heavy] = sim({"--decoder-first-pipeline-num-layers", "10", "--decoder-last-pipeline-num-layers", "6"});
  EXPECT_GT(std::stod(heavy.at("iter_time_ms")), 1.1 * std::stod(even.at("iter_time_ms")));
  EXPECT_LT(std::stod(odd.at("iter_time_ms")), std::stod(even.at("iter_time_ms")));
}

}  // namespace
}  // namespace ptdp
