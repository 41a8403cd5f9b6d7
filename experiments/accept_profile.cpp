#include "experiments/accept_profile.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/common/source_tree.h"
#include "core/common/error.h"
#include "core/common/regular_file.h"
#include "core/sim/hardware.h"

namespace ptdp {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxDim = 1 << 16, kMaxMib = 1 << 16;  // 64 GiB per buffer at most

struct ProfileReader {
  const toml::table& root;
  const std::string& path;

  // A threshold on a ratio or fraction that lies in [0, 1] by construction: at most `most`.
  Threshold fraction(const std::string& field, double most, const char* why) {
    const Threshold t = threshold(field);
    if (t.value > most) usage_error("{}: field '{}' = {} can never be met: {}", path, field, t.value, why);
    return t;
  }
  Threshold threshold(const std::string& field) {
    const auto node = root.at_path(field);
    if (!node) usage_error("{}: field '{}' is missing", path, field);
    const toml::table* t = node.as_table();
    if (!t)
      usage_error("{}: field '{}' must be {{ value = <number>, source = \"<where it comes from>\" }}", path, field);
    const std::optional<double> v = (*t)["value"].value<double>();
    if (!v || !std::isfinite(*v) || !(*v > 0))
      usage_error("{}: field '{}' must have a positive numeric value", path, field);
    const std::optional<std::string> src = (*t)["source"].value<std::string>();
    if (!src || src->empty()) usage_error("{}: field '{}' has no source", path, field);
    return {*v, *src};
  }
  int64_t integer(const std::string& field, int64_t min) {
    const std::optional<int64_t> v = root.at_path(field).value<int64_t>();
    if (!v) usage_error("{}: field '{}' is missing (an integer)", path, field);
    if (*v < min) usage_error("{}: field '{}' must be at least {} (got {})", path, field, min, *v);
    return *v;
  }
  // A size in MiB, at most kMaxMib (64 GiB per buffer).
  int64_t mib(const char* field) {
    const int64_t v = integer(field, 1);
    if (v > kMaxMib) usage_error("{}: field '{}' = {} must be at most {} (MiB)", path, field, v, kMaxMib);
    return v;
  }
  std::string text(const std::string& field) {
    const std::optional<std::string> s = root.at_path(field).value<std::string>();
    if (!s || s->empty()) usage_error("{}: field '{}' is missing (a string)", path, field);
    return *s;
  }
};

// --hardware NAME looks up NAME-accept.toml in the hardware folders; a path is read as it is.
std::string find_profile(const std::string& name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_path) {
    if (!fs::is_regular_file(name_or_path)) usage_error("--hardware {}: no such file", name_or_path);
    return name_or_path;
  }
  std::vector<std::string> looked;
  for (const auto& d : sim::hardware_dirs()) {
    const fs::path p = fs::path(d) / (name_or_path + "-accept.toml");
    if (fs::is_regular_file(p)) return p.string();
    looked.push_back(p.string());
  }
  std::string known;
  for (const auto& d : sim::hardware_dirs()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string stem = e.path().stem().string();
      if (e.path().extension() == ".toml" && stem.ends_with("-accept")) {
        const std::string n = stem.substr(0, stem.size() - 7);
        if (known.find(n) == std::string::npos) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
      }
    }
  }
  usage_error("--hardware '{}': no acceptance profile {}-accept.toml in the hardware folders (profiles with "
              "acceptance thresholds: {})",
              name_or_path, name_or_path, known.empty() ? "none" : known);
}

}  // namespace

std::string resolve_data_path(const std::string& p) {
  if (fs::path(p).is_absolute() || fs::exists(p)) return p;
  if (source_tree().empty()) return p;
  const fs::path in_tree = source_tree() / p;
  return fs::exists(in_tree) ? in_tree.string() : p;
}

namespace {

// name, device, kind, the node, and the GEMM's shape.
void read_machine(ProfileReader& r, AcceptProfile& a) {
  a.name = r.text("name");
  a.device = r.text("device");
  a.kind = r.text("kind");
  if (r.root.contains("cpu_model")) a.cpu_model = r.text("cpu_model");
  if (a.kind != "cpu" && a.kind != "gpu") usage_error("{}: field 'kind' must be cpu or gpu (got '{}')", a.path, a.kind);
  if (a.kind == "gpu") a.node_gpus = int(r.integer("node.gpus", 1));
  else {
    const int64_t ranks = r.integer("node.ranks", 2);  // thread ranks of this process
    if (ranks > 1024) usage_error("{}: field 'node.ranks' = {} must be at most 1024", a.path, ranks);
    a.ranks = int(ranks);
  }
  const auto* shape = r.root.at_path("accept.gemm.shape").as_array();
  if (!shape || shape->size() != 3 || !shape->is_homogeneous(toml::node_type::integer))
    usage_error("{}: field 'accept.gemm.shape' must be [m, n, k] (three integers)", a.path);
  a.gemm_m = *(*shape)[0].value<int64_t>();
  a.gemm_n = *(*shape)[1].value<int64_t>();
  a.gemm_k = *(*shape)[2].value<int64_t>();
  if (a.gemm_m < 1 || a.gemm_n < 1 || a.gemm_k < 1)
    usage_error("{}: field 'accept.gemm.shape' must hold positive sizes", a.path);
  if (a.gemm_m > kMaxDim || a.gemm_n > kMaxDim || a.gemm_k > kMaxDim)
    usage_error("{}: field 'accept.gemm.shape' sizes must be at most {}", a.path, kMaxDim);
  a.gemm_what = r.root.at_path("accept.gemm.what").value_or(std::string());
}

// The node's checks: gemm, memory, allreduce, p2p (a GPU profile's thresholds differ from a CPU one's).
void read_node_checks(ProfileReader& r, AcceptProfile& a) {
  const bool gpu = a.kind == "gpu";
  if (gpu) a.min_gemm_tflops = r.threshold("accept.gemm.min_tflops");
  else a.min_gemm_gflops = r.threshold("accept.gemm.min_gflops");
  a.triad_mib = r.mib("accept.memory.array_mib");
  if (gpu) a.min_memory_gbs = r.threshold("accept.memory.min_add_gbs");
  else a.min_triad_gbs = r.threshold("accept.memory.min_triad_gbs");
  a.allreduce_mib = r.mib("accept.allreduce.mib");
  a.min_allreduce_busbw_gbs = r.threshold("accept.allreduce.min_busbw_gbs");
  a.p2p_mib = r.mib("accept.p2p.mib");
  a.min_p2p_gbs = r.threshold("accept.p2p.min_bandwidth_gbs");
}

// [accept.fleet] and node.nics, every field optional.
void read_fleet(ProfileReader& r, AcceptProfile& a) {
  const toml::table& root = r.root;
  a.internode_mib = root.at_path("accept.fleet.mib") ? r.mib("accept.fleet.mib") : a.allreduce_mib;
  if (root.at_path("node.nics")) {
    const int64_t nics = r.integer("node.nics", 1);
    if (nics > 1024) usage_error("{}: field 'node.nics' = {} must be at most 1024", a.path, nics);
    a.node_nics = int(nics);
  }
  if (root.at_path("accept.fleet.min_allreduce_busbw_gbs"))
    a.min_internode_allreduce_busbw_gbs = r.threshold("accept.fleet.min_allreduce_busbw_gbs");
  if (root.at_path("accept.fleet.min_allreduce_busbw_gbs_per_nic")) {
    if (a.min_internode_allreduce_busbw_gbs.value > 0)
      usage_error("{}: give either 'accept.fleet.min_allreduce_busbw_gbs' or "
                  "'accept.fleet.min_allreduce_busbw_gbs_per_nic', not both",
                  a.path);
    if (a.node_nics == 0)
      usage_error("{}: field 'accept.fleet.min_allreduce_busbw_gbs_per_nic' needs 'node.nics' (the node's "
                  "compute-fabric NICs)",
                  a.path);
    a.min_internode_allreduce_busbw_gbs_per_nic = r.threshold("accept.fleet.min_allreduce_busbw_gbs_per_nic");
  }
  if (root.at_path("accept.fleet.min_p2p_gbs")) a.min_internode_p2p_gbs = r.threshold("accept.fleet.min_p2p_gbs");
  if (root.at_path("accept.fleet.min_spread"))
    a.fleet_min_spread = r.fraction("accept.fleet.min_spread", 0.99,
                                    "a node is named slow when it is more than this fraction of the median below it, "
                                    "and no rate is below 0 (give a value in (0, 0.99])");
}

// [accept.burnin] and [accept.health] (optional), then [accept.train].
void read_burnin_health_train(ProfileReader& r, AcceptProfile& a) {
  const toml::table& root = r.root;
  if (root.at_path("accept.burnin.seconds")) a.burnin_seconds = double(r.integer("accept.burnin.seconds", 1));
  if (root.at_path("accept.burnin.round_seconds"))
    a.burnin_round_seconds = double(r.integer("accept.burnin.round_seconds", 1));
  if (root.at_path("accept.burnin.min_sustained"))
    a.burnin_min_sustained =
        r.fraction("accept.burnin.min_sustained", 1,
                   "the slowest GEMM round over the fastest is at most 1 (give a value in (0, 1])");
  if (root.at_path("accept.health.max_load_per_cpu"))
    a.max_load_per_cpu = r.threshold("accept.health.max_load_per_cpu");
  a.golden = r.text("accept.train.golden");
  a.golden_path = resolve_data_path(a.golden);
  a.max_loss_rel_error = r.threshold("accept.train.max_rel_error");
  if (a.kind == "gpu") {  // until the CUDA golden file exists: the CPU one, with a looser tolerance
    a.cpu_golden = r.text("accept.train.cpu_golden");
    a.cpu_golden_path = resolve_data_path(a.cpu_golden);
    a.max_loss_rel_error_vs_cpu = r.threshold("accept.train.max_rel_error_vs_cpu");
  }
}

}  // namespace

AcceptProfile load_accept_profile(const std::string& name_or_path) {
  AcceptProfile a;
  a.path = find_profile(name_or_path);
  const std::string text = read_regular_file(a.path, "--hardware");
  toml::table root;
  try {
    root = toml::parse(text, a.path);
  } catch (const toml::parse_error& e) {
    usage_error("{}:{}:{}: {}", a.path, e.source().begin.line, e.source().begin.column, e.description());
  }
  ProfileReader r{root, a.path};
  read_machine(r, a);
  read_node_checks(r, a);
  read_fleet(r, a);
  read_burnin_health_train(r, a);
  return a;
}

}  // namespace ptdp
