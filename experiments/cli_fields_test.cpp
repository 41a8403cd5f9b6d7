// `ptdp fields`: the schema scripts read (results/fields.json) is what the tables declare.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/config/results_csv.h"
#include "experiments/testing/cli_runner.h"

#ifndef PTDP_SOURCE_DIR
#error "PTDP_SOURCE_DIR must be defined by the build"
#endif

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

// A field added, renamed or moved in or out of the key changes the schema: regenerate it with
// `build/ptdp fields --json > results/fields.json`.
TEST(CliFields, TheCommittedSchemaIsCurrent) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"fields", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, testing::text_of(std::string(PTDP_SOURCE_DIR) + "/results/fields.json"))
      << "regenerate it: build/ptdp fields --json > results/fields.json";
}

TEST(CliFields, TheTableNamesEveryFlagAndItsPlaceInTheKey) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"fields"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--tp", "--num-query-groups", "--precision", "--overlap-grad-reduce", "--init-method-std"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << " in\n" << r.out;
}

// A model that differs from its preset in any field is the preset's custom variant; one given
// its preset's own values is the preset.
TEST(CliFields, AModelDifferingFromItsPresetInAnyFieldIsNamedCustom) {
  TempDir dir;
  auto model_of = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"simulate", "--hardware", "a100-selene", "--model", "tiny", "--csv", dir.file("r.csv")};
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = run_ptdp(dir, a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return testing::last_result_row(dir.file("r.csv")).at("model");
  };
  EXPECT_EQ(model_of({}), "tiny");
  EXPECT_EQ(model_of({"--make-vocab-size-divisible-by", "64"}), "tiny-custom");
  EXPECT_EQ(model_of({"--ffn-hidden-size", "256"}), "tiny");  // tiny's own 4h
  EXPECT_EQ(model_of({"--ffn-hidden-size", "128"}), "tiny-custom");
  EXPECT_EQ(model_of({"--arch", "llama"}), "tiny-custom");
}

// Megatron's --rotary-base, a field declared in its table alone: validated, used by the model
// (another base, other losses), a result column in the key (empty at the default), recorded in
// checkpoints (a resume under another base is refused naming the flag).
TEST(CliFields, TheRotaryBaseIsAFieldFromTheFlagToTheCheckpoint) {
  TempDir dir;
  auto train = [&](const std::string& csv, std::vector<std::string> extra) {
    std::vector<std::string> a = {"train", "--model", "llama-tiny", "--warmup", "1", "--csv", dir.file(csv)};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_ptdp(dir, a);
  };
  EXPECT_TRUE(IsUsageError(train("bad.csv", {"--iters", "2", "--rotary-base", "0"}), {"--rotary-base 0 must be positive"}));
  const CliResult base = train("base.csv", {"--iters", "2", "--save", dir.file("ck")});
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const CliResult other = train("other.csv", {"--iters", "2", "--rotary-base", "500000"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const auto a = testing::last_result_row(dir.file("base.csv")), b = testing::last_result_row(dir.file("other.csv"));
  EXPECT_EQ(a.at("rope_theta"), "");  // the default: empty, as rows written before the column read
  EXPECT_EQ(b.at("rope_theta"), "500000");
  EXPECT_EQ(b.at("model"), "llama-tiny-custom");
  EXPECT_NE(a.at("loss"), b.at("loss"));
  const auto& key = config_key_columns();
  EXPECT_NE(std::find(key.begin(), key.end(), "rope_theta"), key.end());
  EXPECT_TRUE(IsUsageError(train("resumed.csv", {"--iters", "3", "--rotary-base", "500000", "--load", dir.file("ck")}),
                           {"was saved with --rotary-base 10000, this run has --rotary-base 500000"}));
}

}  // namespace
}  // namespace ptdp
