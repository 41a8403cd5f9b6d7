// `ptdp accept --level 1`, the health pre-flight, against a stand-in for the driver's NVML
// (testing/fake_nvml.cpp, named by PTDP_NVML_LIBRARY): a healthy GPU passes, each planted fault
// fails and is named, only the faulty GPU of several fails, and a machine without NVML is not
// reported as a pass.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/testing/scoped_env.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::ScopedEnv;
using testing::TempDir;

// PTDP_NVML_LIBRARY and PTDP_FAKE_NVML for the processes this test starts (ctest runs each test
// in its own process).
struct FakeNvml {
  explicit FakeNvml(const std::string& settings, const std::string& library = PTDP_FAKE_NVML_LIBRARY)
      : library_("PTDP_NVML_LIBRARY", library), settings_("PTDP_FAKE_NVML", settings) {}
  ScopedEnv library_, settings_;
};

CliResult health(const TempDir& dir, const std::string& settings, std::vector<std::string> extra = {}) {
  FakeNvml nvml(settings);
  std::vector<std::string> args = {"accept", "--hardware", "h100-dgx", "--level", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_ptdp(dir, args);
}

TEST(CliAcceptHealth, AHealthyGpuPassesLevelOneAndTheReportSaysWhatWasRead) {
  TempDir dir;
  const CliResult r = health(dir, "gpus=8", {"--out", dir.file("accept.json")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("health of 8 x NVIDIA H100 80GB HBM3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("health gpu7 PASS: NVIDIA H100 80GB HBM3 #7: processes 0, ECC uncorrectable (volatile) 0, "
                       "rows remapped (uncorrectable) 0, none pending, PCIe x16 of x16, gen 5 of 5, clock events "
                       "none, persistence on"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("health host_load PASS: load average 0.00 over the last minute on "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ACCEPT: PASS (9 of 9 checks)"), std::string::npos) << r.out;
  const std::string json = testing::text_of(dir.file("accept.json"));
  EXPECT_NE(json.find("\"gpu3\""), std::string::npos) << json;
}

TEST(CliAcceptHealth, EachPlantedFaultFailsAndIsNamed) {
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"processes=2", "2 other process(es) computing on it"},
      {"ecc=3", "3 uncorrectable ECC error(s)"},
      {"pending=1", "a row remap pending (reset the GPU)"},
      {"failed=1", "a row remap failed (the card needs service)"},
      {"width=8", "PCIe link x8 of x16"},
      {"events=0x48", "clocks held down: HW slowdown, HW thermal"},
      {"events=0x80", "clocks held down: HW power brake"},
  };
  for (const auto& [setting, named] : faults) {
    TempDir dir;
    const CliResult r = health(dir, setting);
    EXPECT_EQ(r.exit_code, 1) << setting << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("health gpu0 FAIL: " + named), std::string::npos) << setting << "\n" << r.out;
    EXPECT_NE(r.out.find("ACCEPT: FAIL (1 failed: health)"), std::string::npos) << r.out;
  }
}

TEST(CliAcceptHealth, ABusyHostFailsAndIsNamedAndAnUnreadableLoadIsSkipped) {
  TempDir dir;
  setenv("PTDP_LOADAVG", "4096.00 1.00 1.00 4097/5000 77", 1);  // busy on any machine up to 8192 CPUs
  const CliResult busy = health(dir, "gpus=8");
  EXPECT_EQ(busy.exit_code, 1) << busy.out << busy.err;
  EXPECT_NE(busy.out.find("health host_load FAIL: the host is busy: load average 4096.00 over the last minute on "),
            std::string::npos)
      << busy.out;
  EXPECT_NE(busy.out.find("ACCEPT: FAIL (1 failed: health)"), std::string::npos) << busy.out;
  // A profile's own limit: accept.health.max_load_per_cpu.
  const std::string profile = dir.file("h100-dgx-accept.toml");
  {
    std::ofstream f(profile);
    f << testing::text_of(std::string(PTDP_SOURCE_DIR) + "/hardware/h100-dgx-accept.toml")
      << "\n[accept.health]\nmax_load_per_cpu = { value = 1e9, source = \"a test\" }\n";
  }
  {
    FakeNvml nvml("gpus=8");
    const CliResult lenient = run_ptdp(dir, {"accept", "--hardware", profile, "--level", "1"});
    EXPECT_EQ(lenient.exit_code, 0) << lenient.out << lenient.err;
    EXPECT_NE(lenient.out.find("health host_load PASS: load average 4096.00"), std::string::npos) << lenient.out;
  }
  setenv("PTDP_LOADAVG", "garbage", 1);
  const CliResult unread = health(dir, "gpus=8");
  EXPECT_EQ(unread.exit_code, 0) << unread.out << unread.err;
  EXPECT_NE(unread.out.find("health host_load SKIP: PTDP_LOADAVG does not start with a load average: 'garbage'"),
            std::string::npos)
      << unread.out;
  unsetenv("PTDP_LOADAVG");
}

TEST(CliAcceptHealth, OnlyTheFaultyGpuOfSeveralFails) {
  TempDir dir;
  const CliResult r = health(dir, "gpus=4,only=2,ecc=1,persistence=0");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  for (const char* ok : {"health gpu0 PASS", "health gpu1 PASS", "health gpu3 PASS"})
    EXPECT_NE(r.out.find(ok), std::string::npos) << ok << "\n" << r.out;
  EXPECT_NE(r.out.find("health gpu2 FAIL: 1 uncorrectable ECC error(s); "), std::string::npos) << r.out;
  // Persistence off is said, not failed.
  EXPECT_NE(r.out.find("persistence off (each program start re-initialises the GPU)"), std::string::npos) << r.out;
}

TEST(CliAcceptHealth, IdleClocksThePowerCapAndALowLinkGenerationAreNotFaults) {
  TempDir dir;
  const CliResult r = health(dir, "events=0x5,gen=1");  // idle, SW power cap; PCIe gen 1 when idle
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("clock events idle, SW power cap"), std::string::npos) << r.out;
}

TEST(CliAcceptHealth, NoDriverIsRefusedAloneAndSkippedBesideTheBenchmarks) {
  TempDir dir;
  FakeNvml nvml("", dir.file("no-such-libnvidia-ml.so"));
  // --level 1 with nothing to read: refused like a GPU profile on a machine without a GPU.
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "h100-dgx", "--level", "1", "--out",
                                          dir.file("a.json")}),
                           {"--hardware h100-dgx", "no GPU here to check the health of (NVML not available"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.json")));
  // Beside the benchmarks (the virtual GPU has devices but no driver): SKIP, and the rest runs.
  if (std::getenv("VGPU_DEVICES") && std::string(std::getenv("VGPU_DEVICES")) == "0") return;
  const CliResult r = run_ptdp(dir, {"accept", "--hardware", "vgpu", "--checks", "health,gemm", "--quick"});
  if (r.exit_code == 2) GTEST_SKIP() << "no GPU here: " << r.err;  // the CPU build
  EXPECT_NE(r.out.find("health gpus SKIP: NVML not available"), std::string::npos) << r.out;
}

TEST(CliAcceptHealth, ADriverThatFailsToInitialiseIsNamed) {
  TempDir dir;
  FakeNvml nvml("init=FAIL");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "h100-dgx", "--level", "1"}),
                           {"nvmlInit failed: Driver Not Loaded"}));
}

TEST(CliAcceptHealth, BadLevelsAreRefused) {
  TempDir dir;
  FakeNvml nvml("");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "h100-dgx", "--level", "5"}),
                           {"--level 5", "1 (the GPUs' health"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "h100-dgx", "--level", "1", "--checks", "gemm"}),
                           {"--level and --checks"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--level", "1"}),
                           {"--level 1", "CPU profile"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--checks", "health"}),
                           {"--checks health", "CPU profile"}));
}

}  // namespace
}  // namespace ptdp
