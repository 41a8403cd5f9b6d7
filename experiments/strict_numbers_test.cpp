// The strict number rule, and every command's numeric flags going through it.
#include "experiments/strict_numbers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

TEST(StrictNumbers, TheRule) {
  EXPECT_EQ(strict_number_error("12", "INT"), "");
  EXPECT_EQ(strict_number_error("-3", "INT"), "");
  EXPECT_EQ(strict_number_error("2e9", "INT"), "");
  EXPECT_EQ(strict_number_error("0.5", "FLOAT"), "");
  EXPECT_EQ(strict_number_error("anything", "TEXT"), "");
  EXPECT_NE(strict_number_error("", "FLOAT").find("empty"), std::string::npos);
  EXPECT_NE(strict_number_error("", "INT").find("empty"), std::string::npos);
  EXPECT_NE(strict_number_error("99999999999999999999", "INT").find("64-bit"), std::string::npos);
  EXPECT_NE(strict_number_error("18446744073709551616", "UINT").find("64-bit"), std::string::npos);
  EXPECT_NE(strict_number_error("1e30", "INT").find("64-bit"), std::string::npos);
  EXPECT_NE(strict_number_error("2.5", "INT").find("whole"), std::string::npos);
  EXPECT_NE(strict_number_error("1e999", "FLOAT").find("out of range"), std::string::npos);
  EXPECT_NE(strict_number_error("12abc", "FLOAT").find("not a number"), std::string::npos);
}

TEST(StrictNumbers, EmptyAndOverflowingValuesAreRefusedByEveryCommand) {
  TempDir dir;
  const std::vector<std::vector<std::string>> cases = {
      {"train", "--model", "tiny", "--clip-grad", ""},
      {"train", "--model", "tiny", "--weight-decay", ""},
      {"train", "--model", "tiny", "--adam-beta2", ""},
      {"train", "--model", "tiny", "--warmup", ""},
      {"train", "--model", "tiny", "--lr-warmup-iters", "99999999999999999999"},
      {"compare", "a.csv", "b.csv", "--tolerance", ""},
      {"simulate", "--hardware", "a100-selene", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", ""},
      {"plan", "--hardware", "a100-selene", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "64",
       "--max-vpp", ""},
  };
  for (const auto& args : cases) {
    const std::string flag = args[args.size() - 2];
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {flag})) << args[0] << " " << flag;
  }
}

}  // namespace
}  // namespace ptdp
