// The burn-in of `ptdp accept --level 3`: its judgement on fixed rounds (a part that throttles,
// losses that go wrong in a later round) and the command's flow on the CPU profile.
#include "experiments/accept_burnin.h"

#include <gtest/gtest.h>

#include <regex>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

const Threshold kSustained{0.9, "test"}, kTolerance{1e-5, "test"};

std::vector<BurnInRound> steady_rounds(int n, const std::vector<double>& losses) {
  std::vector<BurnInRound> r;
  for (int i = 0; i < n; ++i) r.push_back({60.0 * (i + 1), 800.0 + (i % 2), losses});
  return r;
}

TEST(AcceptBurnIn, SteadyRatesAndGoldenLossesPass) {
  const std::vector<double> golden = {5.5, 5.4, 5.3};
  const std::vector<Check> c = burnin_checks(steady_rounds(5, golden), "TFLOP/s", golden, "g.csv", kSustained, kTolerance);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(c[0].pass) << c[0].detail;
  EXPECT_NEAR(c[0].value, 800.0 / 801.0, 1e-12);
  EXPECT_TRUE(c[1].pass) << c[1].detail;
  EXPECT_NE(c[1].detail.find("4 of 4 later rounds repeated round 1's losses bit for bit"), std::string::npos)
      << c[1].detail;
}

TEST(AcceptBurnIn, AGemmRateThatSagsUnderSustainedLoadFailsAndNamesTheRound) {
  const std::vector<double> golden = {5.5};
  std::vector<BurnInRound> r = steady_rounds(6, golden);
  r[4].gemm_rate = 650;  // 19% down in the fifth round, as a GPU whose clocks drop when hot
  const std::vector<Check> c = burnin_checks(r, "TFLOP/s", golden, "g.csv", kSustained, kTolerance);
  EXPECT_FALSE(c[0].pass);
  EXPECT_NEAR(c[0].value, 650.0 / 801.0, 1e-12);
  EXPECT_NE(c[0].detail.find("slowest round 5 (ended at 300 s) 650 TFLOP/s, fastest round 2 801 TFLOP/s"),
            std::string::npos)
      << c[0].detail;
  EXPECT_TRUE(c[1].pass);
}

TEST(AcceptBurnIn, LossesThatGoWrongInALaterRoundFailAndAreNamed) {
  const std::vector<double> golden = {5.5, 5.4, 5.3};
  std::vector<BurnInRound> r = steady_rounds(4, golden);
  r[2].losses[1] = 5.4 * (1 + 1e-3);
  r[3].losses[2] = std::nan("");
  const std::vector<Check> c = burnin_checks(r, "TFLOP/s", golden, "g.csv", kSustained, kTolerance);
  EXPECT_TRUE(c[0].pass);
  EXPECT_FALSE(c[1].pass);
  EXPECT_NE(c[1].detail.find("worst: round 4 iteration 3, loss nan"), std::string::npos) << c[1].detail;
  EXPECT_NE(c[1].detail.find("1 of 3 later rounds repeated"), std::string::npos) << c[1].detail;
  r[3].losses.pop_back();  // a round that stopped short
  EXPECT_NE(burnin_checks(r, "x", golden, "g.csv", kSustained, kTolerance)[1].detail.find("loss missing"),
            std::string::npos);
}

TEST(AcceptBurnIn, RunsAtLeastTwoRoundsAndUntilTheTimeIsUp) {
  int gemms = 0;
  const auto r = run_burnin(0, "GFLOP/s", [&] { return double(++gemms); }, [] { return std::vector<double>{1.0}; });
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(gemms, 2);
  EXPECT_EQ(r[1].gemm_rate, 2.0);
}

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

TEST(CliAcceptBurnIn, LevelThreeRunsTheBurnInAfterTheChecksAndReportsIt) {
  TempDir dir;
  // The CPU profile with the GEMM thresholds far below any machine: the flow is the subject here.
  std::string text = testing::text_of(testing::source_file("hardware/cpu-accept.toml"));
  text = std::regex_replace(text, std::regex(R"((min_\w+) = \{ value = [^,]+,)"), "$1 = { value = 1e-9,");
  text = std::regex_replace(text, std::regex(R"re(golden = "[^"]*")re"),
                            "golden = \"" + testing::source_file("results/golden/tiny_cpu.csv") + "\"");
  const std::string profile = testing::write_text(dir, "cpu-accept.toml", text);
  const CliResult r =
      run_ptdp(dir, {"accept", "--hardware", profile, "--level", "3", "--burn-in-seconds", "2", "--quick", "--out",
                     dir.file("a.json")},
               300);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("burn-in: the GEMM and tiny 20 iterations against "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("burn-in round 2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("equal to round 1's bit for bit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ACCEPT: PASS (7 of 7 checks)"), std::string::npos) << r.out;
  const std::string csv = testing::text_of(dir.file("a.csv"));
  EXPECT_NE(csv.find("burnin,gemm_sustained"), std::string::npos) << csv;
  EXPECT_NE(csv.find("burnin,loss_max_rel_error"), std::string::npos) << csv;
}

TEST(CliAcceptBurnIn, BadLevelsAndDurationsAreRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--level", "4"}), {"--level 4", "3 (level 2"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--burn-in-seconds", "5"}),
                           {"--burn-in-seconds", "only with --level 3 or --checks burnin"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--level", "3", "--burn-in-seconds", "-1"}),
                           {"--burn-in-seconds -1 must be positive"}));
}

}  // namespace
}  // namespace ptdp
