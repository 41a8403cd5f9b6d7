// `ptdp reproduce llama`: the planner's layout for LLaMA's four sizes on 2,048 A100-80GB, one
// result row each, the days on each token budget and the paper's 65B throughput beside ours;
// bad input is one line naming the flag.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::lines_of;
using testing::run_ptdp;
using testing::split_csv_line;
using testing::text_of;
using testing::TempDir;

TEST(ReproduceLlama, PlansTheFourSizesAndComparesWithThePapers65b) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", "llama", "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(text_of(dir.file("llama.csv")));
  ASSERT_EQ(lines.size(), 5u) << r.out;
  const auto header = split_csv_line(lines[0]);
  std::map<std::string, std::map<std::string, std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    ASSERT_EQ(f.size(), header.size());
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < f.size(); ++k) row[header[k]] = f[k];
    rows[row.at("model")] = row;
  }
  const std::vector<std::string> models = {"llama-7b", "llama-13b", "llama-33b", "llama-65b"};
  double prev = 1e30;
  for (const auto& m : models) {
    ASSERT_TRUE(rows.count(m)) << r.out;
    const auto& row = rows[m];
    EXPECT_EQ(row.at("experiment"), "llama");
    EXPECT_EQ(row.at("mode"), "simulate");
    EXPECT_EQ(row.at("gpus"), "2048");
    EXPECT_EQ(row.at("global_batch"), "2048");
    EXPECT_EQ(row.at("precision"), "bf16");
    const double tok = std::stod(row.at("tokens_per_s")) / 2048;
    EXPECT_LT(tok, prev) << m << ": larger models process fewer tokens per GPU";
    prev = tok;
    EXPECT_LT(std::stod(row.at("model_tflops_per_gpu")), std::stod(row.at("tflops_per_gpu")) + 1e-9) << m;
  }
  EXPECT_EQ(rows["llama-7b"].at("params"), "6738415616");
  // The paper's one figure, printed beside ours (not fitted): 380 tokens/s/GPU, ~21 days.
  EXPECT_NE(r.out.find("paper 380 tokens/s/GPU (20.8 days)"), std::string::npos) << r.out;
  const double tok65 = std::stod(rows["llama-65b"].at("tokens_per_s")) / 2048;
  EXPECT_NEAR(tok65, 380, 0.35 * 380) << "65B far from the paper's throughput";
}

TEST(ReproduceLlama, RefusesRunModeAndSmallScaleNamingTheFlag) {
  TempDir dir;
  CliResult r = run_ptdp(dir, {"reproduce", "llama", "--mode", "run", "--out", dir.file("")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--mode run"), std::string::npos) << r.err;
  r = run_ptdp(dir, {"reproduce", "llama", "--scale", "small", "--out", dir.file("")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--scale small"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptdp
