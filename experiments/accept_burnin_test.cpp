// The burn-in of `ptdp accept --level 3`: its judgement on fixed rounds (a part that throttles,
// losses that go wrong in a later round) and the command's flow on the CPU profile.
#include "experiments/accept_burnin.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

const Threshold kSustained{0.9, "test"}, kTolerance{1e-5, "test"};

std::vector<BurnInRound> steady_rounds(int n, const std::vector<double>& losses) {
  std::vector<BurnInRound> r;
  for (int i = 0; i < n; ++i) {
    BurnInRound x;
    x.seconds = 60.0 * (i + 1);
    x.gemm_rate = 800.0 + (i % 2);
    x.losses = losses;
    r.push_back(x);
  }
  return r;
}

TEST(AcceptBurnIn, SteadyRatesAndGoldenLossesPass) {
  const std::vector<double> golden = {5.5, 5.4, 5.3};
  const std::vector<Check> c = burnin_checks(steady_rounds(5, golden), "TFLOP/s", golden, "g.csv", kSustained, kTolerance);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c[0].pass) << c[0].detail;
  EXPECT_NEAR(c[0].value, 800.0 / 801.0, 1e-12);
  EXPECT_TRUE(c[1].pass) << c[1].detail;
  EXPECT_NE(c[1].detail.find("4 of 4 later rounds repeated round 1's losses bit for bit"), std::string::npos)
      << c[1].detail;
  EXPECT_TRUE(c[2].skipped);  // no sensors: the CPU, the virtual GPU
  EXPECT_EQ(c[2].detail, "no sensors (NVML) here");
}

TEST(AcceptBurnIn, AWrongGemmEntryFailsEvenAtFullRate) {
  const std::vector<double> golden = {5.5};
  std::vector<BurnInRound> r = steady_rounds(3, golden);
  for (BurnInRound& x : r) x.gemm_checked = 12;
  r[2].gemm_wrong = 1;
  const Check c = burnin_checks(r, "TFLOP/s", golden, "g.csv", kSustained, kTolerance)[0];
  EXPECT_FALSE(c.pass);
  EXPECT_NE(c.detail.find("1 of 36 sampled GEMM entries wrong"), std::string::npos) << c.detail;
}

GpuHealth sensor(int index, double watts, int celsius, int mhz, int64_t events = 0) {
  GpuHealth g;
  g.index = index;
  g.power_w = watts;
  g.temperature_c = celsius;
  g.sm_clock_mhz = mhz;
  g.clock_events = events;
  return g;
}

TEST(AcceptBurnIn, SensorsReadOneGpuOrTheRangeOverSeveral) {
  EXPECT_EQ(sensor_summary({}), "");
  EXPECT_EQ(sensor_summary({sensor(0, 690.4, 61, 1980)}), "690 W, 61 C, SM 1980 MHz");
  EXPECT_EQ(sensor_summary({sensor(0, 655, 55, 1980), sensor(1, 690, 61, 1755, 0x4)}),
            "655-690 W, 55-61 C, SM 1755-1980 MHz over 2 GPUs");  // the power cap (0x4) is no fault
  EXPECT_EQ(sensor_summary({sensor(0, 700, 88, 1410, 0x40 | 0x4)}),
            "700 W, 88 C, SM 1410 MHz; clocks held down: gpu0 HW thermal");
}

TEST(AcceptBurnIn, ClocksHeldDownUnderLoadFailAndNameTheFirstRound) {
  const std::vector<double> golden = {5.5};
  std::vector<BurnInRound> r = steady_rounds(4, golden);
  for (BurnInRound& x : r) x.sensors = {sensor(0, 690, 60, 1980), sensor(1, 680, 62, 1980)};
  Check c = burnin_checks(r, "TFLOP/s", golden, "g.csv", kSustained, kTolerance)[2];
  EXPECT_TRUE(c.pass) << c.detail;
  EXPECT_EQ(c.detail, "0 of 4 rounds with the clocks held down; hottest round 1: 680-690 W, 60-62 C, SM 1980 MHz over 2 GPUs");
  r[2].sensors[1] = sensor(1, 700, 87, 1500, 0x80);  // a power brake in the third round
  r[3].sensors[1] = sensor(1, 700, 89, 1400, 0x40);
  c = burnin_checks(r, "TFLOP/s", golden, "g.csv", kSustained, kTolerance)[2];
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.value, 2);
  EXPECT_NE(c.detail.find("2 of 4 rounds with the clocks held down; first in round 3 (ended at 180 s): 690-700 W, 60-87 C, SM "
                          "1500-1980 MHz over 2 GPUs; clocks held down: gpu1 HW power brake; hottest round 4"),
            std::string::npos)
      << c.detail;
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
  std::vector<double> loads;
  auto load = [&](double s, BurnInRound& round) {
    loads.push_back(s);
    round.gemm_rate = double(loads.size());
  };
  const auto r = run_burnin(0, 10, "GFLOP/s", load, [] { return std::vector<double>{1.0}; });
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(loads, (std::vector<double>{0, 0}));  // the time is up: the least load
  EXPECT_EQ(r[1].gemm_rate, 2.0);
  // Rounds of at most round_seconds, the last one cut to end on time.
  loads.clear();
  run_burnin(
      0.5, 0.1, "GFLOP/s",
      [&](double s, BurnInRound&) {
        loads.push_back(s);
        std::this_thread::sleep_for(std::chrono::duration<double>(s));
      },
      [] { return std::vector<double>{1.0}; });
  ASSERT_GE(loads.size(), 2u);
  EXPECT_EQ(loads[0], 0.1);
  double sum = 0;
  for (const double s : loads) {
    EXPECT_LE(s, 0.1);
    sum += s;
  }
  EXPECT_LE(sum, 0.5 + 1e-9);  // no load runs past the burn-in's end
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
  EXPECT_NE(r.out.find("burn-in: rounds of 2 s of the GEMM, each then tiny 20 iterations against "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("burn-in round 2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("equal to round 1's bit for bit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ACCEPT: PASS (7 of 7 checks; 1 skipped: burnin)"), std::string::npos) << r.out;
  const std::string csv = testing::text_of(dir.file("a.csv"));
  EXPECT_NE(csv.find("burnin,gemm_sustained"), std::string::npos) << csv;
  EXPECT_NE(csv.find("burnin,loss_max_rel_error"), std::string::npos) << csv;
  EXPECT_NE(csv.find("burnin,clock_faults,,rounds,<=,0,SKIP"), std::string::npos) << csv;
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
