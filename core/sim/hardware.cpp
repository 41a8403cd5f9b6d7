#include "core/sim/hardware.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "core/common/error.h"
#include "core/common/regular_file.h"
#include "core/common/one_line.h"
#include "core/common/source_tree.h"

namespace ptdp::sim {

namespace fs = std::filesystem;

double HardwareProfile::peak(Precision precision) const {
  if (precision == Precision::F16) return peak_f16;
  if (precision == Precision::Bf16) return peak_bf16;
  if (precision == Precision::F32) return peak_f32;
  return 0;
}

int HardwareProfile::element_bytes(Precision precision) { return precision == Precision::F32 ? 4 : 2; }

namespace {

enum class Range { Any, Positive, NonNegative, Fraction, AtLeastOne };

struct Reader {
  const toml::table& root;
  const std::string& path;
  HardwareProfile& hw;

  // A number written as { value = X, source = "..." }.
  double number(const std::string& field, Range range) {
    const toml::node_view<const toml::node> node = root.at_path(field);
    if (!node) usage_error("{}: field '{}' is missing", path, field);
    const toml::table* t = node.as_table();
    if (!t) usage_error("{}: field '{}' must be {{ value = <number>, source = \"<where it comes from>\" }}", path, field);
    const std::optional<double> v = (*t)["value"].value<double>();
    if (!v) usage_error("{}: field '{}' has no numeric value", path, field);
    const std::optional<std::string> src = (*t)["source"].value<std::string>();
    if (!src || src->empty()) usage_error("{}: field '{}' has no source", path, field);
    const double x = *v;
    if (!std::isfinite(x)) usage_error("{}: field '{}' must be a finite number", path, field);
    switch (range) {
      case Range::Any:
        break;
      case Range::Positive:
        if (!(x > 0)) usage_error("{}: field '{}' must be positive (got {})", path, field, x);
        break;
      case Range::NonNegative:
        if (x < 0) usage_error("{}: field '{}' must not be negative (got {})", path, field, x);
        break;
      case Range::Fraction:
        if (!(x > 0 && x <= 1)) usage_error("{}: field '{}' must be in (0, 1] (got {})", path, field, x);
        break;
      case Range::AtLeastOne:
        if (!(x >= 1)) usage_error("{}: field '{}' must be at least 1 (got {})", path, field, x);
        break;
    }
    hw.sources[field] = *src;
    return x;
  }

  // A number inside [least, most] (0 also, where `range` allows it): the bounds that keep every
  // time and rate the simulator computes from the profile finite (hardware.h, kProfileBounds).
  double bounded(const std::string& field, Range range, double least, double most) {
    const double x = number(field, range);
    if (x > most)
      usage_error("{}: field '{}' = {} must be at most {:g} (beyond, the simulated times overflow or vanish)", path,
                  field, x, most);
    if (x != 0 && x < least)
      usage_error("{}: field '{}' = {} must be {}at least {:g} (below, the simulated times overflow)", path, field, x,
                  range == Range::NonNegative ? "0 or " : "", least);
    return x;
  }

  // A count: a whole number from 1 to `max` (node.gpus, network.nics_per_node, GEMM dimensions).
  int64_t count(const std::string& field, double x, int64_t max) {
    if (!(x >= 1 && x <= double(max) && x == std::floor(x)))
      usage_error("{}: field '{}' must be a whole number from 1 to {} (got {})", path, field, max, x);
    return static_cast<int64_t>(x);
  }
  int64_t count(const std::string& field, int64_t max) { return count(field, number(field, Range::Any), max); }

  std::string text(const std::string& field) {
    const std::optional<std::string> s = root.at_path(field).value<std::string>();
    if (!s || s->empty()) usage_error("{}: field '{}' is missing (a string)", path, field);
    return *s;
  }

  void gemm_points() {
    const toml::node_view<const toml::node> node = root.at_path("gemm.points");
    if (!node) return;
    const toml::array* arr = node.as_array();
    if (!arr) usage_error("{}: field 'gemm.points' must be an array of {{ m, n, k, tflops }}", path);
    if (!arr->empty()) hw.sources["gemm.points"] = text("gemm.points_source");
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::table* t = (*arr)[i].as_table();
      GemmPoint g;
      auto get = [&](const char* key) {
        const std::optional<double> v = t ? (*t)[key].value<double>() : std::nullopt;
        if (!v || !(*v > 0)) usage_error("{}: field 'gemm.points[{}].{}' must be a positive number", path, i, key);
        return *v;
      };
      const std::string at = fmt::format("gemm.points[{}].", i);
      g.m = count(at + "m", get("m"), kMaxGemmDim);
      g.n = count(at + "n", get("n"), kMaxGemmDim);
      g.k = count(at + "k", get("k"), kMaxGemmDim);
      g.tflops = get("tflops");
      hw.gemm_points.push_back(g);
    }
  }
};

}  // namespace

HardwareProfile parse_profile(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    usage_error("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, one_line(e.description()));
  }
  HardwareProfile hw;
  hw.path = path;
  Reader r{root, path, hw};
  hw.name = r.text("name");
  hw.device = r.text("device");
  hw.kind = r.text("kind");
  if (root.contains("cpu_model")) hw.cpu_model = one_line(r.text("cpu_model"));
  if (hw.kind != "gpu" && hw.kind != "cpu")
    usage_error("{}: field 'kind' must be gpu or cpu (got '{}')", path, one_line(hw.kind));
  const std::string precision = r.text("default_precision");
  const auto default_precision = find_enum<Precision>(precision);
  if (!default_precision)
    usage_error("{}: field 'default_precision' must be f16, bf16 or f32 (got '{}')", path, one_line(precision));
  hw.default_precision = *default_precision;

  constexpr double G = 1e9, T = 1e12, us = 1e-6;
  hw.gpus_per_node = static_cast<int>(r.count("node.gpus", kMaxPerNode));
  const ProfileBounds& b = kProfileBounds;
  hw.peak_f16 = r.bounded("compute.peak_tflops_f16", Range::NonNegative, b.least_tflops, b.most_tflops) * T;
  hw.peak_bf16 = r.bounded("compute.peak_tflops_bf16", Range::NonNegative, b.least_tflops, b.most_tflops) * T;
  hw.peak_f32 = r.bounded("compute.peak_tflops_f32", Range::NonNegative, b.least_tflops, b.most_tflops) * T;
  if (root.at_path("compute.peak_tflops_fp8"))
    hw.peak_fp8 = r.bounded("compute.peak_tflops_fp8", Range::NonNegative, b.least_tflops, b.most_tflops) * T;
  hw.launch_overhead_s = r.bounded("compute.launch_overhead_us", Range::NonNegative, 0, b.most_us) * us;
  if (root.at_path("compute.sms")) hw.sms = static_cast<int>(r.count("compute.sms", 1 << 16));
  if (!(hw.peak(hw.default_precision) > 0))
    usage_error("{}: field 'compute.peak_tflops_{}' must be positive (it is the default precision)", path,
                hw.default_precision);
  hw.gemm.max_efficiency = r.bounded("gemm.max_efficiency", Range::Fraction, b.least_fraction, 1);
  hw.gemm.mn_half = r.bounded("gemm.mn_half", Range::NonNegative, 0, b.most_mn_half);
  hw.gemm.k_half = r.bounded("gemm.k_half", Range::NonNegative, 0, b.most_k_half);
  r.gemm_points();
  hw.memory_bytes = r.bounded("memory.capacity_gb", Range::Positive, b.least_gb, b.most_gb) * G;
  hw.memory_bw = r.bounded("memory.bandwidth_gbs", Range::Positive, b.least_gbs, b.most_gbs) * G;
  hw.membound_efficiency = r.bounded("memory.membound_efficiency", Range::Fraction, b.least_fraction, 1);
  hw.reserved_bytes = r.bounded("memory.reserved_gb", Range::NonNegative, 0, b.most_gb) * G;
  hw.allocator_overhead = r.bounded("memory.allocator_overhead", Range::AtLeastOne, 1, b.most_allocator_overhead);
  if (hw.reserved_bytes >= hw.memory_bytes)
    usage_error("{}: field 'memory.reserved_gb' must be less than memory.capacity_gb", path);
  hw.nvlink_p2p_bw = r.bounded("nvlink.p2p_bandwidth_gbs", Range::Positive, b.least_gbs, b.most_gbs) * G;
  hw.nvlink_busbw = r.bounded("nvlink.allreduce_busbw_gbs", Range::Positive, b.least_gbs, b.most_gbs) * G;
  hw.nvlink_latency_s = r.bounded("nvlink.latency_us", Range::NonNegative, 0, b.most_us) * us;
  if (root.at_path("nvlink.nccl_channels"))
    hw.nccl_channels = static_cast<int>(r.count("nvlink.nccl_channels", hw.sms > 0 ? hw.sms : 1 << 16));
  hw.nic_bw = r.bounded("network.nic_bandwidth_gbs", Range::Positive, b.least_gbs, b.most_gbs) * G;
  hw.nics_per_node = static_cast<int>(r.count("network.nics_per_node", kMaxPerNode));
  hw.network_efficiency = r.bounded("network.efficiency", Range::Fraction, b.least_fraction, 1);
  hw.network_latency_s = r.bounded("network.latency_us", Range::NonNegative, 0, b.most_us) * us;
  if (root.at_path("node.pcie_switches")) {
    hw.pcie_switches = static_cast<int>(r.count("node.pcie_switches", kMaxPerNode));
    if (hw.gpus_per_node % hw.pcie_switches || hw.nics_per_node % hw.pcie_switches)
      usage_error("{}: field 'node.pcie_switches' ({}) must divide node.gpus ({}) and network.nics_per_node ({})", path,
                  hw.pcie_switches, hw.gpus_per_node, hw.nics_per_node);
  }
  return hw;
}

std::string other_cpu_warning(const HardwareProfile& hw, const std::string& this_cpu) {
  if (hw.kind != "cpu" || hw.cpu_model.empty() || hw.cpu_model == this_cpu) return "";
  return fmt::format("profile {} ({}) was measured on a '{}' CPU (its cpu_model); this machine's is '{}': what it "
                     "predicts is for that CPU",
                     hw.name, hw.path, hw.cpu_model, this_cpu);
}

std::vector<std::string> hardware_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("PTDP_HARDWARE_DIR"); env && *env) dirs.push_back(env);
  dirs.push_back("hardware");
  if (const fs::path root = source_tree(); !root.empty()) dirs.push_back((root / "hardware").string());
  return dirs;
}

std::vector<std::string> profile_names() {
  std::vector<std::string> names;
  for (const auto& d : hardware_dirs()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".toml" && !e.path().stem().string().ends_with("-accept"))
        names.push_back(e.path().stem().string());  // NAME-accept.toml: acceptance thresholds (ptdp accept)
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

HardwareProfile load_profile(const std::string& name_or_path) {
  std::string path;
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".toml"));
  if (is_path) {
    path = name_or_path;
    if (!fs::is_regular_file(path)) usage_error("--hardware {}: no such file", path);
  } else {
    for (const auto& d : hardware_dirs()) {
      const fs::path p = fs::path(d) / (name_or_path + ".toml");
      if (fs::is_regular_file(p)) {
        path = p.string();
        break;
      }
    }
    if (path.empty()) {
      std::string known;
      for (const auto& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
      usage_error("--hardware '{}' is not a profile name (known: {}) or a .toml file", name_or_path,
                  known.empty() ? "none found" : known);
    }
  }
  return parse_profile(read_regular_file(path, "--hardware"), path);
}

}  // namespace ptdp::sim
