// Hardware profiles: the shipped ones load with a source for every number; a missing, negative,
// unsourced or malformed field is refused with the file and the field named.
#include "core/sim/hardware.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "core/common/error.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string selene_text() { return read_text(testing::source_path("hardware/a100-selene.toml")); }

// Expects UsageError whose message contains every needle.
void expect_refused(const std::string& text, const std::vector<std::string>& needles) {
  try {
    parse_profile(text, "bad.toml");
    ADD_FAILURE() << "expected UsageError for needles " << ::testing::PrintToString(needles);
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " lacks " << n;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(SimHardware, ShippedProfilesLoadWithASourceForEveryNumber) {
  const std::vector<std::string> names = profile_names();
  for (const char* want : {"a100-selene", "h100-dgx", "h200", "cpu"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& name : names) {
    const HardwareProfile hw = load_profile(name);
    EXPECT_EQ(hw.name, name);
    EXPECT_GT(hw.peak(hw.default_precision), 0) << name;
    EXPECT_GE(hw.sources.size(), 20u) << name;  // every numeric field
    for (const auto& [field, src] : hw.sources) EXPECT_FALSE(src.empty()) << name << " " << field;
  }
}

TEST(SimHardware, SeleneHasThePapersNumbers) {
  const HardwareProfile hw = load_profile("a100-selene");
  EXPECT_EQ(hw.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(hw.peak(Precision::F16), 312e12);
  EXPECT_DOUBLE_EQ(hw.nic_bw, 25e9);  // 200 Gb/s HDR
  EXPECT_EQ(hw.nics_per_node, 8);
  EXPECT_EQ(hw.device, "NVIDIA A100-SXM4-80GB");
}

TEST(SimHardware, MissingFieldNamesTheFileAndTheField) {
  const std::string text = std::regex_replace(selene_text(), std::regex("\nbandwidth_gbs = [^\n]*"), "");
  expect_refused(text, {"bad.toml", "memory.bandwidth_gbs", "missing"});
}

TEST(SimHardware, NegativeFieldNamesTheFileAndTheField) {
  const std::string text = std::regex_replace(selene_text(), std::regex("nic_bandwidth_gbs = \\{ value = 25"),
                                              "nic_bandwidth_gbs = { value = -25");
  expect_refused(text, {"bad.toml", "network.nic_bandwidth_gbs", "positive", "-25"});
}

TEST(SimHardware, EfficiencyAboveOneIsRefused) {
  const std::string text = std::regex_replace(selene_text(), std::regex("max_efficiency = \\{ value = [0-9.]+"),
                                              "max_efficiency = { value = 1.5");
  expect_refused(text, {"bad.toml", "gemm.max_efficiency", "(0, 1]"});
}

TEST(SimHardware, NumberWithoutSourceIsRefused) {
  const std::string text = std::regex_replace(
      selene_text(), std::regex("capacity_gb = \\{ value = ([0-9.]+), source = \"[^\"]*\" \\}"),
      "capacity_gb = { value = $1 }");
  expect_refused(text, {"bad.toml", "memory.capacity_gb", "source"});
}

TEST(SimHardware, BareNumberIsRefused) {
  const std::string text = std::regex_replace(selene_text(), std::regex("\ngpus = \\{[^\n]*"), "\ngpus = 8");
  expect_refused(text, {"bad.toml", "node.gpus", "value", "source"});
}

TEST(SimHardware, SyntaxErrorNamesTheFileAndLine) {
  expect_refused("name = \"x\"\n[node\ngpus = 1\n", {"bad.toml:2:"});
}

std::string with_gpus(const std::string& value) {
  return std::regex_replace(selene_text(), std::regex("\ngpus = \\{ value = 8,"), "\ngpus = { value = " + value + ",");
}

TEST(SimHardware, CountsMustBeWholeNumbersInRange) {
  for (const auto& [value, got] : std::vector<std::pair<std::string, std::string>>{
           {"1e300", "1e+300"}, {"-3", "-3"}, {"0", "0"}, {"2.5", "2.5"}, {"1048577", "1048577"}})
    expect_refused(with_gpus(value),
                   {"bad.toml: field 'node.gpus' must be a whole number from 1 to 1048576 (got " + got + ")"});
  EXPECT_EQ(parse_profile(with_gpus("16"), "ok.toml").gpus_per_node, 16);
  EXPECT_EQ(parse_profile(with_gpus("1048576"), "ok.toml").gpus_per_node, 1 << 20);
  const std::string nics = std::regex_replace(selene_text(), std::regex("nics_per_node = \\{ value = 8"),
                                              "nics_per_node = { value = 8.5");
  expect_refused(nics, {"bad.toml: field 'network.nics_per_node' must be a whole number from 1 to 1048576 (got 8.5)"});
  // PCIe switches (optional) hold whole numbers of the node's GPUs and NICs.
  const std::string three = std::regex_replace(selene_text(), std::regex("pcie_switches = \\{ value = 4"),
                                               "pcie_switches = { value = 3");
  expect_refused(three, {"bad.toml: field 'node.pcie_switches' (3) must divide node.gpus (8) and network.nics_per_node (8)"});
  const std::string none = std::regex_replace(selene_text(), std::regex("\npcie_switches = [^\n]*"), "");
  EXPECT_EQ(parse_profile(none, "ok.toml").pcie_switches, 0);
  // NCCL's channels (optional) hold an SM each: at most the GPU's SMs.
  const std::string channels = std::regex_replace(selene_text(), std::regex("nccl_channels = \\{ value = 24"),
                                                  "nccl_channels = { value = 200");
  expect_refused(channels, {"bad.toml: field 'nvlink.nccl_channels' must be a whole number from 1 to 108 (got 200)"});
  EXPECT_EQ(parse_profile(selene_text(), "ok.toml").nccl_channels, 24);
  const std::string no_channels = std::regex_replace(selene_text(), std::regex("\nnccl_channels = [^\n]*"), "");
  EXPECT_EQ(parse_profile(no_channels, "ok.toml").nccl_channels, 0);
}

TEST(SimHardware, GemmPointDimensionsMustBeWholeNumbersInRange) {
  const std::string cpu = read_text(testing::source_path("hardware/cpu.toml"));
  const std::string huge = std::regex_replace(cpu, std::regex("n = 256, k = 256"), "n = 10241e300, k = 256",
                                              std::regex_constants::format_first_only);
  expect_refused(huge, {"bad.toml: field 'gemm.points[1].n' must be a whole number from 1 to 9007199254740992 "
                        "(got 1.0241e+304)"});
  const std::string half = std::regex_replace(cpu, std::regex("k = 256"), "k = 0.5",
                                              std::regex_constants::format_first_only);
  expect_refused(half, {"bad.toml: field 'gemm.points[0].k' must be a whole number", "(got 0.5)"});
}

TEST(SimHardware, TextQuotedFromTheFileStaysOnOneLine) {
  expect_refused("name = \"x\"\ndevice = \"d\"\nkind = \"a\\nb\\tc\"\n",
                 {"bad.toml: field 'kind' must be gpu or cpu (got 'a\\nb\\tc')"});
  expect_refused("name = \"x\"\ndevice = \"d\"\nkind = \"gpu\"\ndefault_precision = \"f\\r8\"\n",
                 {"bad.toml: field 'default_precision' must be f16, bf16 or f32 (got 'f\\r8')"});
  // toml++ quotes the character it stopped at: here the line break after `f`.
  expect_refused("name = f\n", {"bad.toml:1:", "\\n"});
}

TEST(SimHardware, UnknownNameListsTheKnownProfiles) {
  try {
    load_profile("no-such-gpu");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--hardware 'no-such-gpu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a100-selene"), std::string::npos) << msg;
  }
  EXPECT_THROW(load_profile("/nonexistent/dir/x.toml"), UsageError);
}

TEST(SimHardware, GemmEfficiencyGrowsWithSizeAndStaysBelowTheMaximum) {
  const HardwareProfile hw = load_profile("a100-selene");
  const double small = hw.gemm.efficiency(512, 512, 64), big = hw.gemm.efficiency(8192, 8192, 8192);
  EXPECT_LT(small, big);
  EXPECT_LT(big, hw.gemm.max_efficiency);
  EXPECT_GT(big, 0.95 * hw.gemm.max_efficiency);
}

}  // namespace
}  // namespace ptdp::sim
