// `train --data-order megatron`: Megatron-core's sample order through the command line (the order
// itself is checked against Megatron's code in core/data/megatron_order_test.cpp): a weighted
// blend reported at start, every layout equal to one rank, a resume that continues the order.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;
using testing::text_of;

// Two byte-level datasets: GPL-3 and the same text cut to its first 8 KiB.
class CliDataOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = dir_.file("gpl");
    ASSERT_EQ(run_ptdp(dir_, {"preprocess", "--input", "/usr/share/common-licenses/GPL-3", "--output-prefix", a_})
                  .exit_code,
              0);
    const std::string text = text_of("/usr/share/common-licenses/GPL-3").substr(0, 8192);
    testing::write_file(dir_.file("short.txt"), std::vector<uint8_t>(text.begin(), text.end()));
    b_ = dir_.file("short");
    ASSERT_EQ(run_ptdp(dir_, {"preprocess", "--input", dir_.file("short.txt"), "--output-prefix", b_}).exit_code, 0);
  }
  CliResult train(std::vector<std::string> extra) {
    std::vector<std::string> args = {"train",         "--model",     "tiny", "--data-order", "megatron",
                                     "--micro-batch", "2",           "--global-batch",       "8",
                                     "--warmup",      "1",           "--data-cache-path",    dir_.file("cache")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ptdp(dir_, args);
  }
  // The losses of a loss log, one per iteration.
  std::vector<double> losses(const std::string& path) {
    std::istringstream in(text_of(path));
    std::string line;
    std::getline(in, line);
    std::vector<double> out;
    while (std::getline(in, line)) out.push_back(std::stod(line.substr(line.find(',') + 1)));
    return out;
  }
  TempDir dir_;
  std::string a_, b_;
};

TEST_F(CliDataOrder, AWeightedBlendIsReportedAndEveryLayoutEqualsOneRank) {
  const std::string blend = "0.7 " + a_ + " 0.3 " + b_;
  const CliResult one =
      train({"--data", blend, "--iters", "3", "--loss-log", dir_.file("one.csv"), "--csv", dir_.file("row.csv")});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // The result row names the data and what was drawn of each source: SAMPLES:EPOCHS.
  std::map<std::string, std::string> f = testing::last_result_row(dir_.file("row.csv"));
  EXPECT_EQ(f["data"], blend);
  EXPECT_EQ(f["data_order"], "megatron");
  EXPECT_EQ(f["data_sources"].rfind("17:", 0), 0u) << f["data_sources"];
  EXPECT_NE(f["data_sources"].find(";8:"), std::string::npos) << f["data_sources"];
  EXPECT_NE(one.out.find("data: Megatron-core's order, split train of --split 969,30,1, 25 samples"),
            std::string::npos)
      << one.out;
  // Megatron's blend of 24 requested samples: ceil(24 x 0.7) + ceil(24 x 0.3) = 17 + 8.
  EXPECT_NE(one.out.find(a_ + ": weight 0.7, 17 samples drawn"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find(b_ + ": weight 0.3, 8 samples drawn"), std::string::npos) << one.out;
  const CliResult grid = train({"--data", blend, "--iters", "3", "--tp", "2", "--pp", "2", "--dp", "2",
                                "--loss-log", dir_.file("grid.csv")});
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  const std::vector<double> a = losses(dir_.file("one.csv")), b = losses(dir_.file("grid.csv"));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 2e-5 * a[i]) << "iteration " << i + 1;
}

TEST_F(CliDataOrder, AResumedRunContinuesTheSameOrder) {
  const CliResult whole = train({"--data", a_, "--iters", "4", "--loss-log", dir_.file("whole.csv")});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(train({"--data", a_, "--iters", "2", "--save", dir_.file("ck")}).exit_code, 0);
  const CliResult rest =
      train({"--data", a_, "--iters", "4", "--load", dir_.file("ck"), "--loss-log", dir_.file("rest.csv")});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  const std::vector<double> w = losses(dir_.file("whole.csv")), r = losses(dir_.file("rest.csv"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], w[2]);
  EXPECT_EQ(r[1], w[3]);
}

TEST_F(CliDataOrder, WithoutACachePathTheIndexGoesWhereMegatronPutsItAndIsFoundThere) {
  const std::vector<std::string> args = {"train", "--model", "tiny", "--data-order", "megatron", "--data", a_,
                                         "--micro-batch", "2", "--global-batch", "8", "--iters", "2"};
  const CliResult first = run_ptdp(dir_, args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Megatron-core's default: PREFIX/cache/GPTDataset_indices, files named by the MD5 of its description.
  const std::string dir = a_ + "/cache/GPTDataset_indices/";
  const size_t at = first.out.find("index built as " + dir);
  ASSERT_NE(at, std::string::npos) << first.out;
  const std::string base = first.out.substr(at + 15, first.out.find('\n', at) - at - 15);
  EXPECT_EQ(base.size(), dir.size() + 32 + std::string("-GPTDataset-train").size()) << base;
  EXPECT_NE(text_of(base + "-description.txt").find("\"dataset_path\": \"" + a_ + "\""), std::string::npos);
  const CliResult second = run_ptdp(dir_, args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("index found in " + base + "\n"), std::string::npos) << second.out;
}

TEST_F(CliDataOrder, BadOrderSplitOrListsAreRefused) {
  EXPECT_TRUE(IsUsageError(run_ptdp(dir_, {"train", "--model", "tiny", "--data", a_, "--data-order", "random"}),
                           {"--data-order 'random' must be ptdp or megatron"}));
  EXPECT_TRUE(IsUsageError(train({"--data", a_, "--split", "9,x,1"}), {"--split"}));
  EXPECT_TRUE(IsUsageError(train({"--data", "0.5 " + a_ + " -1 " + b_}), {"--data"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir_, {"train", "--model", "tiny", "--data-order", "ptdp", "--data", a_ + " " + b_}),
                           {"needs --data-order megatron"}));
}

// Without --data-order, Megatron's own flags (--split, --data-cache-path, a list in --data) select
// its order, as a Megatron-LM user expects; with --data-order ptdp, or synthetic data, nothing would
// read them: refused. Empty values are refused.
TEST_F(CliDataOrder, MegatronsFlagsSelectItsOrderAndAreRefusedWhereNothingReadsThem) {
  const std::vector<std::string> base = {"train", "--model", "tiny", "--micro-batch", "2", "--global-batch", "8",
                                         "--iters", "2", "--warmup", "1"};
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ptdp(dir_, args);
  };
  const std::string cache = dir_.file("cache");
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--data", a_, "--split", "98,2,0", "--data-cache-path", cache},
                                                                 {"--data", a_, "--data-cache-path", cache},
                                                                 {"--data", a_ + " " + b_, "--data-cache-path", cache}}) {
    const CliResult r = run(extra);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("data: Megatron-core's order, split train of --split "), std::string::npos) << r.out;
  }
  EXPECT_TRUE(IsUsageError(run({"--data", a_, "--data-order", "ptdp", "--split", "98,2,0"}),
                           {"--split: applies to --data-order megatron", "--data-order ptdp has none"}));
  EXPECT_TRUE(IsUsageError(run({"--data", a_, "--data-order", "ptdp", "--data-cache-path", cache}),
                           {"--data-cache-path: applies to --data-order megatron"}));
  EXPECT_TRUE(IsUsageError(run({"--split", "98,2,0"}), {"--split: applies to", "not --data synthetic"}));
  EXPECT_TRUE(IsUsageError(run({"--data", a_, "--data-cache-path", ""}), {"--data-cache-path '': needs a value"}));
  EXPECT_TRUE(IsUsageError(run({"--pipeline-model-parallel-layout", ""}),
                           {"--pipeline-model-parallel-layout '': needs a value"}));
}

}  // namespace
}  // namespace ptdp
