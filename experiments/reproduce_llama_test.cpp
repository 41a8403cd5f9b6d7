// `ptdp reproduce llama`: the planner's layout for LLaMA's four sizes on 2,048 A100-80GB, one
// result row each, the days on each token budget and the paper's 65B throughput beside ours;
// bad input is one line naming the flag.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "experiments/reproduce_llama.h"
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

// Each bad spec is one UsageError naming the file and the key.
TEST(ReproduceLlama, BadSpecsNameTheFileAndTheKey) {
  const std::string good = R"(title = "x"
gpus = 2048
global_batch = 2048
precision = "bf16"
stack = "mcore"
zero_modes = [0, 1]
paper_model = "llama-65b"
paper_tokens_per_s_per_gpu = 380
[[models]]
model = "llama-7b"
tokens = 1.0e12
)";
  const LlamaSpec s = parse_llama_spec(good, "l.toml");
  EXPECT_EQ(s.gpus, 2048);
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_EQ(s.models[0].tokens, 1.0e12);
  auto refused = [&](const std::string& from, const std::string& to, const std::string& want) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    try {
      parse_llama_spec(text, "l.toml");
      ADD_FAILURE() << "accepted: " << to;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("l.toml"), std::string::npos) << e.what();
    }
  };
  refused("gpus = 2048", "gpus = \"many\"", "'gpus'");
  refused("zero_modes = [0, 1]", "zero_modes = [3]", "zero_modes");
  refused("stack = \"mcore\"", "stack = \"megatron-2020\"", "key 'stack': --stack 'megatron-2020' must be megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp");
  refused("stack = \"mcore\"\n", "", "'stack'");
  refused("model = \"llama-7b\"", "model = \"gpt-1.7b\"", "not a llama preset");
  refused("model = \"llama-7b\"", "model = \"llama-1b\"", "not a llama preset");
  refused("tokens = 1.0e12", "tokens = -1.0", "tokens must be positive");
  refused("title = \"x\"", "title = ", "l.toml");
}

}  // namespace
}  // namespace ptdp
