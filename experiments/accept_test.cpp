// End-to-end tests of `ptdp accept`: the CPU profile passes on this machine (--quick), a threshold
// raised above what the machine does fails and names the row, the training smoke test matches the
// golden losses (results/golden/tiny_cpu.csv, which `ptdp train` reproduces), and bad profiles,
// golden files and flags are usage errors that write nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/data/testing/data_test_util.h"
#include "core/results/csv_reader.h"
#include "experiments/accept_check.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::source_file;
using testing::split_csv_line;
using testing::TempDir;
using testing::text_of;
using testing::write_text;

namespace fs = std::filesystem;

// The source tree: <root>/experiments/accept_test.cpp.
// hardware/cpu-accept.toml with `field = { value = ...` replaced by `value`, the golden path made
// absolute (the copy lives in a temporary directory), written into `dir`.
std::string modified_profile(const TempDir& dir, const std::string& field, const std::string& value,
                             const std::string& golden = "") {
  std::string text = text_of(source_file("hardware/cpu-accept.toml"));
  if (!field.empty()) {
    const std::regex re(field + R"( = \{ value = [^,]+,)");
    EXPECT_TRUE(std::regex_search(text, re)) << "no " << field << " in the profile";
    text = std::regex_replace(text, re, field + " = { value = " + value + ",");
  }
  const std::string g = golden.empty() ? source_file("results/golden/tiny_cpu.csv") : golden;
  text = std::regex_replace(text, std::regex(R"(golden = "[^"]*")"), "golden = \"" + g + "\"");
  return write_text(dir, "profile.toml", text);
}

// The report's CSV rows by check name: {status, value, threshold}.
std::map<std::string, std::vector<std::string>> cpu_report_rows(const std::string& csv) {
  std::map<std::string, std::vector<std::string>> rows;
  const auto lines = lines_of(text_of(csv));
  EXPECT_FALSE(lines.empty());
  const auto header = split_csv_line(lines.at(0));
  EXPECT_EQ(header.at(0), "check");
  EXPECT_EQ(header.at(6), "status");
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    EXPECT_EQ(f.size(), header.size()) << lines[i];
    rows[f.at(0)] = {f.at(6), f.at(2), f.at(5)};
  }
  return rows;
}

// The verdict line names each failed check once (the burn-in's three metrics are one check).
TEST(AcceptVerdict, EachFailedCheckIsNamedOnceWithItsFailedMetrics) {
  auto check = [](std::string name, std::string metric, bool pass, bool skipped = false) {
    Check c{std::move(name), std::move(metric), "", ">=", 1, 1, pass, "", ""};
    c.skipped = skipped;
    return c;
  };
  EXPECT_EQ(failed_checks_text({check("gemm", "bf16_tflops", false), check("memory", "device_add_gbs", true),
                                check("burnin", "gemm_sustained", false), check("burnin", "loss_max_rel_error", true),
                                check("burnin", "clock_faults", false), check("health", "gpu0", false, true)}),
            "gemm, burnin (gemm_sustained, clock_faults)");
  EXPECT_EQ(failed_checks_text({check("gemm", "bf16_tflops", true)}), "");
}

// The thresholds have a 2.5x margin over this machine's quiet rates, but another CPU-bound job on
// the same two cores slows every rate about 3.5x (docs/ACCEPTANCE.md); a failing run is therefore
// repeated, up to three runs 10 s apart. A run that still fails only in rates that ptdp itself
// found measured under load (other processes on the CPUs, accept_load.h) skips the test: that
// verdict is about the load, not the machine. Bad results, and a FAIL on a quiet machine, fail.
TEST(CliAccept, CpuProfilePassesOnThisMachine) {
  TempDir dir;
  const std::string out = dir.file("accept.json");
  CliResult r;
  std::string earlier;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    r = run_ptdp(dir, {"accept", "--hardware", "cpu", "--quick", "--out", out}, 300);
    if (r.exit_code != 1) break;
    earlier += "attempt " + std::to_string(attempt) + ":\n" + r.out + r.err;
    if (attempt < 3) ::sleep(10);
  }
  if (r.exit_code == 1) {
    // "ACCEPT: FAIL (1 failed: gemm; measured under load: gemm, ...)": every failed check under load.
    std::smatch m;
    const bool verdict = std::regex_search(
        r.out, m,
        std::regex(
            R"(ACCEPT: FAIL \(\d+ failed: ([a-z0-9, ]+)(; \d+ skipped: [a-z0-9, ]+)?; measured under load: ([a-z0-9, ]+),)"));
    if (verdict && m[1] == m[3]) GTEST_SKIP() << "every failed check was measured under load:\n" << earlier;
  }
  EXPECT_EQ(r.exit_code, 0) << earlier << r.out << r.err;
  EXPECT_NE(r.out.find("ACCEPT: PASS (5 of 5 checks)"), std::string::npos) << r.out;
  const auto rows = cpu_report_rows(dir.file("accept.csv"));
  for (const char* check : {"gemm", "memory", "allreduce", "p2p", "train"}) {
    ASSERT_TRUE(rows.count(check)) << check;
    EXPECT_EQ(rows.at(check)[0], "PASS") << check;
  }
  const std::string json = text_of(out);
  EXPECT_NE(json.find("\"passed\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"git_sha\": "), std::string::npos);
  EXPECT_NE(json.find("\"host\": "), std::string::npos);
}

TEST(CliAccept, ThresholdAboveTheMachineFailsAndNamesTheRow) {
  TempDir dir;
  const std::string profile = modified_profile(dir, "min_gflops", "1e9");  // 1 PFLOP/s on a CPU
  const std::string out = dir.file("r.json");
  const CliResult r =
      run_ptdp(dir, {"accept", "--hardware", profile, "--quick", "--checks", "gemm,train", "--out", out}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // (on a busy machine the verdict goes on: "; measured under load: gemm, ...", accept_load.h)
  EXPECT_NE(r.out.find("ACCEPT: FAIL (1 failed: gemm"), std::string::npos) << r.out;
  bool gemm_line = false;
  for (const auto& line : lines_of(r.out))
    if (line.rfind("gemm ", 0) == 0) gemm_line = line.find(" FAIL ") != std::string::npos;
  EXPECT_TRUE(gemm_line) << r.out;
  const auto rows = cpu_report_rows(dir.file("r.csv"));
  EXPECT_EQ(rows.at("gemm")[0], "FAIL");
  EXPECT_EQ(rows.at("gemm")[2], "1e+09");
  EXPECT_EQ(rows.at("train")[0], "PASS");
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_NE(text_of(out).find("\"passed\": false"), std::string::npos);
}

TEST(CliAccept, LossesOffTheGoldenTrajectoryFailTheTrainCheck) {
  TempDir dir;
  // The golden file with iteration 7's loss moved by 1e-4 relative (ten times the tolerance).
  std::string golden = text_of(source_file("results/golden/tiny_cpu.csv"));
  const CsvTable t = CsvTable::read(source_file("results/golden/tiny_cpu.csv"), {"iteration", "loss"});
  ASSERT_EQ(t.size(), 20u);
  const std::string loss7 = t.text(6, "loss");
  const size_t at = golden.find("," + loss7 + "\n");
  ASSERT_NE(at, std::string::npos);
  golden.replace(at + 1, loss7.size(), fmt::format("{:.9g}", t.number(6, "loss") * (1 + 1e-4)));
  const std::string gpath = write_text(dir, "golden.csv", golden);
  const CliResult r =
      run_ptdp(dir, {"accept", "--hardware", modified_profile(dir, "", "", gpath), "--checks", "train"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("ACCEPT: FAIL (1 failed: train)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("worst at iteration 7"), std::string::npos) << r.out;
}

// The golden file holds what `ptdp train` does with the flags written in it (printed to 4 decimals).
TEST(CliAccept, GoldenLossesAreWhatPtdpTrainPrints) {
  TempDir dir;
  const std::string golden = source_file("results/golden/tiny_cpu.csv");
  const CsvTable t = CsvTable::read(golden, {"model", "data", "micro_batch", "global_batch", "seed", "lr", "iteration",
                                             "loss"});
  ASSERT_EQ(t.size(), 20u);
  const CliResult r = run_ptdp(dir, {"train", "--model", t.text(0, "model"), "--data", t.text(0, "data"),
                                     "--micro-batch", t.text(0, "micro_batch"), "--global-batch",
                                     t.text(0, "global_batch"), "--seed", t.text(0, "seed"), "--lr", t.text(0, "lr"),
                                     "--iters", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::regex re(R"(iteration\s+(\d+)/20 \| loss (\d+\.\d+))");
  int seen = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), end; it != end; ++it) {
    const size_t i = std::stoul((*it)[1]) - 1;
    ASSERT_LT(i, t.size());
    EXPECT_NEAR(std::stod((*it)[2]), t.number(i, "loss"), 0.5e-4 + 1e-9) << "iteration " << i + 1;
    ++seen;
  }
  EXPECT_EQ(seen, 20) << r.out;
}

// ---- bad input: one line, exit code 2, no report ----

TEST(CliAccept, UnknownProfileNameIsRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "no-such-machine"}),
                           {"--hardware 'no-such-machine'", "no-such-machine-accept.toml", "cpu"}));
}

TEST(CliAccept, InternodeChecksOutsideALaunchedFleetAreRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--checks", "gemm,internode"}),
                           {"--checks internode", "one process per node"}));
}

TEST(CliAccept, MissingThresholdNamesTheField) {
  TempDir dir;
  std::string text = text_of(source_file("hardware/cpu-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(min_triad_gbs = [^\n]*\n)"), "");
  const std::string profile = write_text(dir, "p.toml", text);
  const std::string out = dir.file("r.json");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", profile, "--out", out}),
                           {profile, "'accept.memory.min_triad_gbs' is missing"}));
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliAccept, ThresholdWithoutSourceIsRefused) {
  TempDir dir;
  std::string text = text_of(source_file("hardware/cpu-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(min_gflops = [^\n]*\n)"), "min_gflops = { value = 10 }\n");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", write_text(dir, "p.toml", text)}),
                           {"'accept.gemm.min_gflops' has no source"}));
}

// A GPU profile has fields of its own (node.gpus, min_tflops, ...): the CPU profile marked
// kind = "gpu" is refused naming the first one missing (accept_gpu_test.cpp tests the GPU profiles).
TEST(CliAccept, CpuProfileMarkedGpuMissesTheGpuFields) {
  TempDir dir;
  std::string text = text_of(source_file("hardware/cpu-accept.toml"));
  text = std::regex_replace(text, std::regex(R"(kind = "cpu")"), "kind = \"gpu\"");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", write_text(dir, "gpu.toml", text)}),
                           {"field 'node.gpus' is missing"}));
}

// The fleet's all-reduce threshold is absolute or per NIC; per NIC needs the node's NICs.
TEST(CliAccept, PerNicFleetThresholdNeedsTheNodesNicsAndExcludesTheAbsoluteOne) {
  TempDir dir;
  const std::string base = text_of(source_file("hardware/cpu-accept.toml"));
  const std::string per_nic = "min_allreduce_busbw_gbs_per_nic = { value = 1, source = \"test\" }\n";
  const std::string absolute = "min_allreduce_busbw_gbs = { value = 1, source = \"test\" }\n";
  const auto with = [&](const std::string& fleet_lines, const std::string& node_lines) {
    std::string text = std::regex_replace(base, std::regex(R"(\n\[accept\.fleet\][^\n]*\n)"),
                                          "\n[accept.fleet]\n" + fleet_lines);
    text = std::regex_replace(text, std::regex(R"(\n\[node\][^\n]*\n)"), "\n[node]\n" + node_lines);
    return write_text(dir, "fleet.toml", text);
  };
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", with(per_nic, ""), "--checks", "gemm"}),
                           {"'accept.fleet.min_allreduce_busbw_gbs_per_nic' needs 'node.nics'"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", with(per_nic + absolute, "nics = 2\n"), "--checks",
                                          "gemm"}),
                           {"either 'accept.fleet.min_allreduce_busbw_gbs' or", "not both"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", with(per_nic, "nics = 0\n"), "--checks", "gemm"}),
                           {"'node.nics'"}));
}

TEST(CliAccept, MalformedGoldenFileNamesFileAndLine) {
  TempDir dir;
  std::string golden = text_of(source_file("results/golden/tiny_cpu.csv"));
  const size_t third = golden.find('\n', golden.find('\n', golden.find('\n') + 1) + 1);  // end of line 3
  golden.replace(third, 0, 1, 'x');  // line 3's loss is no number
  const std::string gpath = write_text(dir, "golden.csv", golden);
  EXPECT_TRUE(IsUsageError(
      run_ptdp(dir, {"accept", "--hardware", modified_profile(dir, "", "", gpath), "--checks", "train"}),
      {gpath + ":3: column 'loss'", "is not a number"}));
}

TEST(CliAccept, OutInAMissingDirectoryIsRefusedBeforeMeasuring) {
  TempDir dir;
  const std::string out = dir.file("no/such/dir/r.json");
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--out", out}), {"--out", "does not exist"}));
}

TEST(CliAccept, UnknownCheckIsRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--checks", "gemm,disk"}),
                           {"--checks: unknown check 'disk'"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Sizes that reach an allocation are bounded: a clear line instead of a crash, an internal check
// or a terminate.
TEST(CliAccept, ProfileSizesBeyondTheBoundsAreRefused) {
  TempDir dir;
  const std::string base = text_of(source_file("hardware/cpu-accept.toml"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"shape = [4294967296, 4294967296, 4294967296]", "'accept.gemm.shape' sizes must be at most 65536"},
      {"array_mib = 35184372088832", "'accept.memory.array_mib' = 35184372088832 must be at most 65536"},
      {"ranks = 100000", "'node.ranks' = 100000 must be at most 1024"},
  };
  for (const auto& [line, needle] : cases) {
    std::string text = base;
    const std::string key = line.substr(0, line.find(' '));
    text = std::regex_replace(text, std::regex("\n" + key + " = [^\n#]*"), "\n" + line + " ", std::regex_constants::format_first_only);
    const std::string path = write_text(dir, "big.toml", text);
    const CliResult r = run_ptdp(dir, {"accept", "--hardware", path, "--checks", "gemm"}, 60);
    EXPECT_TRUE(IsUsageError(r, {needle})) << line << "\n" << r.err;
  }
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// A threshold no measurement can meet (a ratio of at most 1 asked to be 2) is a bad profile, not
// a machine that fails.
TEST(CliAccept, ThresholdsThatCanNeverBeMetAreRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(
      run_ptdp(dir, {"accept", "--hardware", modified_profile(dir, "min_sustained", "2"), "--checks", "gemm"}),
      {"'accept.burnin.min_sustained' = 2 can never be met", "at most 1"}));
  EXPECT_TRUE(IsUsageError(
      run_ptdp(dir, {"accept", "--hardware", modified_profile(dir, "min_spread", "1"), "--checks", "gemm"}),
      {"'accept.fleet.min_spread' = 1 can never be met"}));
}

// A golden file whose run cannot train as written (a negative learning rate, a loss the check
// divides by that is 0, more threads than the machine can run, a model far beyond a smoke test)
// is refused naming the file, the line and the column, before anything is measured.
TEST(CliAccept, GoldenFileOfARunThatCannotTrainIsRefused) {
  TempDir dir;
  const std::string good = text_of(source_file("results/golden/tiny_cpu.csv"));
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> cases = {
      {{",1234,0.001,", ",1234,-0.001,"}, ":2: column 'lr' = -0.001 must be in (0, 1]"},
      {{",1234,0.001,1,", ",1234,0.001,100000,"}, ":2: column 'omp_threads' = 100000 must be at most"},
      {{"tiny,", "gpt-1t,"}, ":2: column 'model' must be tiny, small"},
      {{",1,5.5746045410633087", ",1,0"}, ":2: column 'loss' = 0 must be a positive number"},
  };
  for (const auto& [edit, needle] : cases) {
    const std::string golden = std::regex_replace(
        good, std::regex(std::regex_replace(edit.first, std::regex(R"([.])"), R"(\.)")), edit.second);
    ASSERT_NE(golden, good) << edit.first;
    const std::string gpath = write_text(dir, "golden.csv", golden);
    const std::string out = dir.file("r.json");
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", modified_profile(dir, "", "", gpath), "--checks",
                                            "gemm,train", "--out", out}),
                             {gpath + needle}))
        << edit.second;
    EXPECT_FALSE(fs::exists(out));
  }
}

// Sizes inside the profile's bounds that this machine cannot hold are refused before anything is
// allocated, naming the field and the size (PTDP_MEMINFO stands for /proc/meminfo: 1 GiB free).
TEST(CliAccept, ChecksNeedingMoreMemoryThanIsAvailableAreRefused) {
  TempDir dir;
  std::string text = text_of(modified_profile(dir, "", ""));
  text = std::regex_replace(text, std::regex("\narray_mib = [0-9]+"), "\narray_mib = 65536");
  const std::string profile = write_text(dir, "big.toml", text);
  const std::string out = dir.file("r.json");
  ::setenv("PTDP_MEMINFO", "MemTotal: 2097152 kB\nMemFree: 1048576 kB\nMemAvailable: 1048576 kB\n", 1);
  const CliResult r = run_ptdp(dir, {"accept", "--hardware", profile, "--out", out});
  ::unsetenv("PTDP_MEMINFO");
  EXPECT_TRUE(IsUsageError(r, {"--hardware " + profile, "3 arrays of accept.memory.array_mib = 65536 MiB",
                               "needs 192.0 GiB", "1.0 GiB available (MemAvailable of PTDP_MEMINFO)"}));
  EXPECT_FALSE(fs::exists(out));
}

// A FAIL measured while the machine was busy says so: in a warning when the check ends, in the
// check's detail and in the verdict (PTDP_LOADAVG stands for /proc/loadavg: 4096 runnable tasks).
TEST(CliAccept, AFailUnderLoadSaysSo) {
  TempDir dir;
  const std::string out = dir.file("r.json");
  ::setenv("PTDP_LOADAVG", "4096.00 1.00 1.00 4097/5000 77", 1);
  const CliResult r = run_ptdp(
      dir,
      {"accept", "--hardware", modified_profile(dir, "min_gflops", "1e9"), "--quick", "--checks", "gemm", "--out", out},
      120);
  ::unsetenv("PTDP_LOADAVG");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("ptdp: warning: gemm: measured under load: the load average was 4096.00 on"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("its FAIL may be the load's doing, not the machine's"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("ACCEPT: FAIL (1 failed: gemm; measured under load: gemm, which may be the load's doing"),
            std::string::npos)
      << r.out;
  EXPECT_NE(text_of(out).find("\"under_load\": true"), std::string::npos);
}

// A profile records the CPU its thresholds were measured on; applied on another CPU it says so,
// on this machine's CPU it says nothing.
TEST(CliAccept, AProfileMeasuredOnAnotherCpuIsNamed) {
  TempDir dir;
  std::string here;  // /proc/cpuinfo's model name, as ptdp reads it
  for (const std::string& line : lines_of(text_of("/proc/cpuinfo")))
    if (here.empty() && line.rfind("model name", 0) == 0)
      here = line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
  if (here.empty()) GTEST_SKIP() << "/proc/cpuinfo names no model here";
  const std::string base = text_of(modified_profile(dir, "", ""));
  const std::regex cpu_model("\ncpu_model = \"[^\"]*\"");
  ASSERT_TRUE(std::regex_search(base, cpu_model));
  auto run_on = [&](const std::string& model) {
    const std::string text = std::regex_replace(base, cpu_model, "\ncpu_model = \"" + model + "\"");
    return run_ptdp(dir, {"accept", "--hardware", write_text(dir, "cpu.toml", text), "--checks", "train"}, 120);
  };
  const CliResult other = run_on("Imaginary CPU 9000");
  EXPECT_EQ(other.exit_code, 0) << other.out << other.err;
  EXPECT_NE(other.err.find("was measured on a 'Imaginary CPU 9000' CPU (its cpu_model); this machine's is '" + here +
                           "': its thresholds may not fit this CPU"),
            std::string::npos)
      << other.err;
  const CliResult same = run_on(here);
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_EQ(same.err.find("cpu_model"), std::string::npos) << same.err;
}

// More threads than the machine can run only queue up (100000 OpenMP threads did not finish).
TEST(CliAccept, MoreThreadsThanTheMachineCanRunAreRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"accept", "--hardware", "cpu", "--threads", "100000"}, 30),
                           {"--threads 100000 must be at most", "hardware threads here"}));
}

}  // namespace
}  // namespace ptdp
