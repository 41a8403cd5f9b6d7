// The result row's shape beyond layers, hidden and heads: query groups, the MLP's width and the
// norm epsilon, each empty at its default, and part of the configuration key, so that two runs
// that differ only there are two configurations for `ptdp compare` (and `ptdp reproduce`).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::run_ptdp;
using testing::TempDir;

TEST(CliRowShape, QueryGroupsMlpWidthAndEpsAreRecordedAndKeyTheConfiguration) {
  TempDir dir;
  auto train = [&](const std::string& csv, std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--model", "llama-tiny", "--iters", "2", "--csv", dir.file(csv)};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_ptdp(dir, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return testing::last_result_row(dir.file(csv));
  };
  const auto plain = train("plain.csv", {});
  EXPECT_EQ(plain.at("query_groups"), "");
  EXPECT_EQ(plain.at("ffn_hidden_size"), "");
  EXPECT_EQ(plain.at("norm_eps"), "");
  const auto gqa = train("gqa.csv", {"--group-query-attention", "--num-query-groups", "2"});
  EXPECT_EQ(gqa.at("query_groups"), "2");
  const auto other = train("other.csv", {"--ffn-hidden-size", "128", "--norm-epsilon", "1e-6"});
  EXPECT_EQ(other.at("ffn_hidden_size"), "128");
  EXPECT_EQ(other.at("norm_eps"), "1e-06");
  // The rule's own width given explicitly is the default shape: empty.
  const auto rule = train("rule.csv", {"--ffn-hidden-size", "256"});
  EXPECT_EQ(rule.at("ffn_hidden_size"), "");
  // Same model name (llama-tiny-custom), same layout: only the key's shape columns tell them apart.
  EXPECT_EQ(gqa.at("model"), other.at("model"));
  for (const auto& [base, cur] : {std::pair{"gqa.csv", "other.csv"}, std::pair{"other.csv", "gqa.csv"}}) {
    const CliResult c = run_ptdp(dir, {"compare", dir.file(base), dir.file(cur)});
    EXPECT_EQ(c.exit_code, 1) << c.out << c.err;  // the baseline's configuration is missing from CURRENT
    EXPECT_NE(c.out.find("missing"), std::string::npos) << c.out;
  }
}

}  // namespace
}  // namespace ptdp
