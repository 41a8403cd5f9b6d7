// `ptdp accept --hardware PROFILE [--out FILE]`: a short hardware acceptance run. It measures
// the GEMM rate, the memory bandwidth (STREAM triad), the all-reduce bus bandwidth and the p2p
// bandwidth inside a node (the local communicator with the node's ranks), and trains `tiny` for
// 20 iterations against golden losses; each figure is compared with a threshold of the
// acceptance profile (hardware/NAME-accept.toml). A profile of kind = "gpu" runs the GPU
// checks of accept_gpu.h instead, and trains on the CUDA backend. Prints a PASS/FAIL/SKIP
// table, writes a JSON and a CSV report (atomically); exit code 0 when every check that ran
// passes, 1 otherwise, 2 on bad input.
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "core/backend/backend.h"
#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/threads.h"
#include "core/comm/agreement.h"
#include "core/comm/local/local_comm.h"
#include "core/common/error.h"
#include "core/common/regular_file.h"
#include "core/results/csv_reader.h"
#include "core/results/provenance.h"
#include "experiments/accept_burnin.h"
#include "experiments/accept_health.h"
#include "core/results/output_files.h"
#include "core/sim/hardware.h"
#include "core/train/run.h"
#include "experiments/accept_check.h"
#include "experiments/accept_fleet.h"
#include "experiments/accept_gpu.h"

namespace ptdp {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The source tree this file was compiled from (<root>/experiments/cmd_accept.cpp -> <root>).
fs::path source_root() {
  const fs::path here(__FILE__);
  return here.is_absolute() ? here.parent_path().parent_path() : fs::path();
}

// ---------------------------------------------------------------- the acceptance profile

struct ProfileReader {
  const toml::table& root;
  const std::string& path;

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

// A relative path in the profile: from the current directory if it is there, else from the source tree.
std::string resolve_data_path(const std::string& p) {
  if (fs::path(p).is_absolute() || fs::exists(p)) return p;
  const fs::path in_tree = source_root() / p;
  return fs::exists(in_tree) ? in_tree.string() : p;
}

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
  a.name = r.text("name");
  a.device = r.text("device");
  a.kind = r.text("kind");
  if (a.kind != "cpu" && a.kind != "gpu") usage_error("{}: field 'kind' must be cpu or gpu (got '{}')", a.path, a.kind);
  const bool gpu = a.kind == "gpu";
  if (gpu) a.node_gpus = int(r.integer("node.gpus", 1));
  else {
    const int64_t ranks = r.integer("node.ranks", 2);  // thread ranks of this process
    if (ranks > 1024) usage_error("{}: field 'node.ranks' = {} must be at most 1024", a.path, ranks);
    a.ranks = int(ranks);
  }
  const auto* shape = root.at_path("accept.gemm.shape").as_array();
  if (!shape || shape->size() != 3 || !shape->is_homogeneous(toml::node_type::integer))
    usage_error("{}: field 'accept.gemm.shape' must be [m, n, k] (three integers)", a.path);
  a.gemm_m = *(*shape)[0].value<int64_t>();
  a.gemm_n = *(*shape)[1].value<int64_t>();
  a.gemm_k = *(*shape)[2].value<int64_t>();
  if (a.gemm_m < 1 || a.gemm_n < 1 || a.gemm_k < 1)
    usage_error("{}: field 'accept.gemm.shape' must hold positive sizes", a.path);
  constexpr int64_t kMaxDim = 1 << 16, kMaxMib = 1 << 16;  // 64 GiB per buffer at most
  if (a.gemm_m > kMaxDim || a.gemm_n > kMaxDim || a.gemm_k > kMaxDim)
    usage_error("{}: field 'accept.gemm.shape' sizes must be at most {}", a.path, kMaxDim);
  const auto mib_field = [&](const char* key) {
    const int64_t v = r.integer(key, 1);
    if (v > kMaxMib) usage_error("{}: field '{}' = {} must be at most {} (MiB)", a.path, key, v, kMaxMib);
    return v;
  };
  a.gemm_what = root.at_path("accept.gemm.what").value_or(std::string());
  if (gpu) a.min_gemm_tflops = r.threshold("accept.gemm.min_tflops");
  else a.min_gemm_gflops = r.threshold("accept.gemm.min_gflops");
  a.triad_mib = mib_field("accept.memory.array_mib");
  if (gpu) a.min_memory_gbs = r.threshold("accept.memory.min_add_gbs");
  else a.min_triad_gbs = r.threshold("accept.memory.min_triad_gbs");
  a.allreduce_mib = mib_field("accept.allreduce.mib");
  a.min_allreduce_busbw_gbs = r.threshold("accept.allreduce.min_busbw_gbs");
  a.p2p_mib = mib_field("accept.p2p.mib");
  a.min_p2p_gbs = r.threshold("accept.p2p.min_bandwidth_gbs");
  a.internode_mib = root.at_path("accept.fleet.mib") ? mib_field("accept.fleet.mib") : a.allreduce_mib;
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
  if (root.at_path("accept.fleet.min_spread")) a.fleet_min_spread = r.threshold("accept.fleet.min_spread");
  if (root.at_path("accept.burnin.seconds")) a.burnin_seconds = double(r.integer("accept.burnin.seconds", 1));
  if (root.at_path("accept.burnin.round_seconds"))
    a.burnin_round_seconds = double(r.integer("accept.burnin.round_seconds", 1));
  if (root.at_path("accept.burnin.min_sustained"))
    a.burnin_min_sustained = r.threshold("accept.burnin.min_sustained");
  if (root.at_path("accept.health.max_load_per_cpu"))
    a.max_load_per_cpu = r.threshold("accept.health.max_load_per_cpu");
  a.golden = r.text("accept.train.golden");
  a.golden_path = resolve_data_path(a.golden);
  a.max_loss_rel_error = r.threshold("accept.train.max_rel_error");
  if (gpu) {  // until the CUDA golden file exists: the CPU one, with a looser tolerance
    a.cpu_golden = r.text("accept.train.cpu_golden");
    a.cpu_golden_path = resolve_data_path(a.cpu_golden);
    a.max_loss_rel_error_vs_cpu = r.threshold("accept.train.max_rel_error_vs_cpu");
  }
  return a;
}

// ---------------------------------------------------------------- measurements

// sgemm y = x w^T at [m, k] x [n, k]^T, in GFLOP/s; one untimed call first.
Samples measure_gemm(int64_t m, int64_t n, int64_t k, int reps) {
  std::vector<float> x(m * k, 0.01f), w(n * k, 0.02f), y(m * n);
  Samples s;
  for (int r = -1; r < reps; ++r) {
    const auto t0 = Clock::now();
    cpu::gemm<float>(false, true, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
    const double t = seconds_since(t0);
    if (r >= 0) s.rates.push_back(2.0 * m * n * k / t / 1e9);
  }
  const double want = double(k) * 0.01f * 0.02f;
  if (std::fabs(y[0] - want) > 1e-3 * want || std::fabs(y[m * n - 1] - want) > 1e-3 * want)
    throw RuntimeError(fmt::format("sgemm check failed: y[0] = {}, expected {}", y[0], want));
  return s;
}

// STREAM triad a = b + q c over three float arrays of `mib` MiB each (OpenMP), in GB/s
// counting 3 arrays moved per pass, as STREAM does; one untimed pass first.
Samples measure_triad(int64_t mib, int reps) {
  const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const float q = 3.0f;
  float* pa = a.get();
  const float* pb = b.get();
  const float* pc = c.get();
  Samples s;
  for (int r = -1; r < reps; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + q * pc[i];
    const double t = seconds_since(t0);
    if (r >= 0) s.rates.push_back(3.0 * n * sizeof(float) / t / 1e9);
  }
  if (pa[n / 2] != 7.0f) throw RuntimeError("STREAM triad check failed");
  return s;
}

struct CommResult {
  Samples s;
  int64_t wrong = 0;  // elements that were not the expected value
};

// In-place all-reduce (sum) of `mib` MiB of f32 on `ranks` local ranks; bus bandwidth in GB/s,
// nccl-tests' busbw = size / time * 2 (n - 1) / n. Rank 0's time from a barrier to its return.
CommResult measure_allreduce(int ranks, int64_t mib, int reps) {
  const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));
  CommResult res;
  run_local_ranks(ranks, [&](int rank, Communicator& comm) {
    set_cpu_threads(1);
    Tensor x = Tensor::empty({n}, DType::F32);
    float* p = x.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = float(rank + 1);
    comm.all_reduce(x, ReduceOp::Sum);  // checked, and warms up every buffer
    const float want = float(ranks * (ranks + 1) / 2);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += p[i] != want;
    Tensor w = Tensor::empty({1}, DType::F64);
    w.data<double>()[0] = double(wrong);
    comm.all_reduce(w, ReduceOp::Sum);
    for (int r = 0; r < reps; ++r) {
      x.zero_();
      comm.barrier();
      const auto t0 = Clock::now();
      comm.all_reduce(x, ReduceOp::Sum);
      const double t = seconds_since(t0);
      if (rank == 0) res.s.rates.push_back(double(n) * sizeof(float) / t / 1e9 * 2.0 * (ranks - 1) / ranks);
    }
    if (rank == 0) res.wrong = int64_t(w.data<double>()[0]);
  });
  return res;
}

// Rank 0 sends `mib` MiB to rank 1: bandwidth in GB/s (bytes over the receiver's time from a barrier).
CommResult measure_p2p(int ranks, int64_t mib, int reps) {
  const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));
  CommResult res;
  run_local_ranks(ranks, [&](int rank, Communicator& comm) {
    set_cpu_threads(1);
    Tensor x = Tensor::empty({n}, DType::F32);
    float* p = x.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = rank == 0 ? float(i % 1024) : -1.0f;
    for (int r = -1; r < reps; ++r) {
      comm.barrier();
      const auto t0 = Clock::now();
      if (rank == 0) comm.send(x, 1, 7);
      if (rank == 1) comm.recv(x, 0, 7);
      const double t = seconds_since(t0);
      if (rank == 1 && r == -1)
        for (int64_t i = 0; i < n; ++i) res.wrong += p[i] != float(i % 1024);
      if (rank == 1 && r >= 0) res.s.rates.push_back(double(n) * sizeof(float) / t / 1e9);
    }
    comm.barrier();
  });
  return res;
}

// ---------------------------------------------------------------- golden losses

// The run a golden file describes (its columns), and its losses by iteration.
struct GoldenRun {
  std::string model = "tiny", data = "synthetic";
  int micro_batch = 4, global_batch = 8, omp_threads = 1;
  uint64_t seed = 1234;
  double lr = 1e-3;
  std::vector<double> losses;  // iteration 1..n
};

const std::vector<std::string>& golden_columns() {
  static const std::vector<std::string> c = {"model", "data",  "micro_batch", "global_batch", "seed",
                                             "lr",    "omp_threads", "iteration", "loss"};
  return c;
}

GoldenRun read_golden(const std::string& path) {
  const CsvTable t = CsvTable::read(path, golden_columns());
  if (t.size() == 0) usage_error("{}: no rows (golden losses, one row per iteration)", path);
  GoldenRun g;
  g.model = t.text(0, "model");
  g.data = t.text(0, "data");
  g.micro_batch = int(t.integer(0, "micro_batch"));
  g.global_batch = int(t.integer(0, "global_batch"));
  g.seed = uint64_t(t.integer(0, "seed"));
  g.lr = t.number(0, "lr");
  g.omp_threads = int(t.integer(0, "omp_threads"));
  if (g.data != "synthetic") usage_error("{}:{}: column 'data' must be synthetic (got '{}')", path, t.line(0), g.data);
  if (g.micro_batch < 1 || g.global_batch < g.micro_batch || g.global_batch % g.micro_batch || g.omp_threads < 1)
    usage_error("{}:{}: micro_batch, global_batch and omp_threads must be positive, global_batch a multiple of "
                "micro_batch",
                path, t.line(0));
  for (size_t i = 0; i < t.size(); ++i) {
    for (const char* c : {"model", "data", "micro_batch", "global_batch", "seed", "lr", "omp_threads"})
      if (t.text(i, c) != t.text(0, c))
        usage_error("{}:{}: column '{}' differs from the first row's ('{}' vs '{}'): one run per file", path,
                    t.line(i), c, t.text(i, c), t.text(0, c));
    if (t.integer(i, "iteration") != int64_t(i) + 1)
      usage_error("{}:{}: column 'iteration' must count 1, 2, 3, ... (got {})", path, t.line(i),
                  t.text(i, "iteration"));
    g.losses.push_back(t.number(i, "loss"));
  }
  return g;
}

// Trains `g.model` in this process as `ptdp train --model M --micro-batch b --global-batch B
// --seed S --lr X --iters N` does (one rank, synthetic data, f32: core/train/run.h) and returns the
// losses; on the CUDA backend (GPU 0) with `on_gpu`, as `--backend cuda` does.
std::vector<double> train_losses(const GoldenRun& g, int iters, bool on_gpu) {
  set_cpu_threads(g.omp_threads);
  RunConfig c;
  c.model = preset_config(g.model);
  c.par.micro_batch = g.micro_batch;
  c.par.global_batch = g.global_batch;
  c.seed = g.seed;
  c.opt.lr.max_lr = g.lr;
  c.iters = iters;
  c.warmup = 0;  // nothing here is timed
  c.backend = on_gpu ? BackendKind::Cuda : BackendKind::Cpu;
  validate_run(c);
  const std::unique_ptr<Backend> be = on_gpu ? make_gpu_train_backend() : make_cpu_backend();
  const auto world = make_local_world(1);
  RunOptions o;
  o.keep_history = true;
  TrainingRun run(c, *be, *world[0], *world[0], o);
  run.set_up_data();
  run.build();
  run.train();
  std::vector<double> losses;
  for (const auto& [it, st] : run.history()) losses.push_back(st.loss);
  return losses;
}

void write_golden(const std::string& path, const GoldenRun& g) {
  std::string out;
  for (size_t i = 0; i < golden_columns().size(); ++i) out += fmt::format("{}{}", i ? "," : "", golden_columns()[i]);
  out += "\n";
  for (size_t i = 0; i < g.losses.size(); ++i)
    out += fmt::format("{},{},{},{},{},{},{},{},{:.17g}\n", g.model, g.data, g.micro_batch, g.global_batch, g.seed,
                       g.lr, g.omp_threads, i + 1, g.losses[i]);
  write_user_file(path, out);
}

// ---------------------------------------------------------------- the report

struct Provenance {
  std::string git_sha = ptdp::git_sha(), host = host_name(), device = cpu_name(), timestamp = utc_timestamp();
  std::string cpu = cpu_name();
  std::string software;  // GPU profiles: the CUDA runtime, driver and NCCL versions
};

// The JSON report (nlohmann::json): the run's provenance, then one object per check; a skipped
// check's value is null.
std::string report_json(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv, int threads,
                        bool quick, bool passed) {
  using nlohmann::ordered_json;
  ordered_json j = {{"profile", p.name},       {"profile_path", p.path}, {"profile_device", p.device},
                    {"git_sha", pv.git_sha},   {"host", pv.host},        {"device", pv.device},
                    {"cpu", pv.cpu},           {"software", pv.software}, {"timestamp", pv.timestamp},
                    {"threads", threads},      {"ranks", p.ranks},       {"quick", quick},
                    {"passed", passed},        {"checks", ordered_json::array()}};
  for (const Check& c : checks) j["checks"].push_back(check_json(c));
  return j.dump(2) + "\n";
}
std::string report_csv(const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv) {
  std::string s =
      "check,metric,value,unit,op,threshold,status,detail,threshold_source,profile,git_sha,host,device,timestamp\n";
  for (const Check& c : checks) {
    std::vector<std::string> f = check_csv_fields(c);
    f.insert(f.end(), {c.detail, c.source, p.name, pv.git_sha, pv.host, pv.device, pv.timestamp});
    s += csv_row(f);
  }
  return s;
}

// An output file named by `flag`: not a directory, in a directory that exists and is writable.
// --out FILE: the JSON report is FILE, the CSV report FILE with the extension .csv.
std::pair<std::string, std::string> report_paths(const std::string& out) {
  const fs::path p(out);
  if (p.extension() == ".csv")
    usage_error("--out {}: names the JSON report (the CSV report goes beside it, with the extension .csv); "
                "use a .json name",
                out);
  check_output_file(out, "--out");
  fs::path csv = p;
  csv.replace_extension(".csv");
  check_output_file(csv.string(), "--out (its CSV report)");
  return {p.string(), csv.string()};
}

// Standard output to /dev/null while alive (a fleet's processes other than rank 0).
class ScopedQuietStdout {
 public:
  ScopedQuietStdout() {
    std::fflush(stdout);
    saved_ = ::dup(1);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 1);
      ::close(null);
    }
  }
  ~ScopedQuietStdout() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      ::dup2(saved_, 1);
      ::close(saved_);
    }
  }
  ScopedQuietStdout(const ScopedQuietStdout&) = delete;
  ScopedQuietStdout& operator=(const ScopedQuietStdout&) = delete;

 private:
  int saved_ = -1;
};

// A fleet's end: every process's checks gathered on rank 0, which prints the fleet's table and
// writes the fleet report (--out); every process returns the fleet's exit code.
int fleet_report(Communicator& world, const AcceptProfile& p, const std::vector<Check>& checks, const Provenance& pv,
                 const std::pair<std::string, std::string>& out, int gpu) {
  FleetMember me{fleet_node_name(), pv.device, world.rank(), checks, gpu};
  const std::vector<FleetMember> members = gather_fleet(world, me);
  Tensor code = Tensor::zeros({1}, DType::F32);
  if (world.rank() == 0) {
    const FleetVerdict v = judge_fleet(members, p.fleet_min_spread.value);
    print_fleet(v);
    if (!out.first.empty()) {
      write_user_file(out.first, fleet_json(members, v, p.name, pv.git_sha, pv.timestamp));
      write_user_file(out.second, fleet_csv(v, p.name, pv.git_sha, pv.timestamp));
      fmt::print("reports: {} and {}\n", out.first, out.second);
    }
    size_t failed = 0, slow = 0;
    for (const FleetRow& r : v.rows) {
      failed += !r.failed.empty();
      slow += r.failed.empty() && !r.outliers.empty();
    }
    if (v.passed) fmt::print("ACCEPT: PASS (fleet of {} processes)\n", v.rows.size());
    else
      fmt::print("ACCEPT: FAIL (fleet of {} processes: {} failed, {} outlier(s); exclude {} node(s))\n", v.rows.size(),
                 failed, slow, v.exclude.size());
    code.data<float>()[0] = v.passed ? 0.0f : 1.0f;
  }
  world.broadcast(code, 0);
  return int(code.data<float>()[0]);
}

const std::vector<std::string>& all_checks() {
  static const std::vector<std::string> c = {"health", "gemm",  "memory",   "allreduce",
                                             "p2p",    "train", "internode", "burnin"};
  return c;
}

struct AcceptFlags {
  std::string hardware, out, write_golden;
  bool quick = false;
  int threads = 0;
  int level = 0;  // 0: not given (2)
  double burnin_seconds = 0;  // 0: not given (the profile's accept.burnin.seconds)
  std::vector<std::string> checks;
};

// `world`: the job's processes when launched over several (a fleet, accept_fleet.h), else null.
int accept(const AcceptFlags& f, Communicator* world) {
  // What the flags and the profile ask for, checked before anything is measured. In a fleet every
  // process checks its own (the same flags, its own node's GPUs) and all agree: a bad flag ends
  // every process with one line and exit code 2, not MPI_Abort's banner.
  AcceptProfile p;
  bool gpu = false, benchmarks = false;
  std::pair<std::string, std::string> out;
  std::optional<GoldenRun> golden;
  std::string health_why;
  std::vector<GpuHealth> health;
  auto wanted = [&](const std::string& c) {
    if (f.level == 1) return c == "health";
    if (c == "internode" && !world) return false;
    if (f.checks.empty()) return (c != "health" || gpu) && (c != "burnin" || f.level == 3);
    return std::find(f.checks.begin(), f.checks.end(), c) != f.checks.end();
  };
  // The golden losses and their tolerance; a GPU profile uses the CPU file until its own exists.
  auto golden_source = [&p, &gpu] {
    const std::string own = resolve_data_path(p.golden);
    if (!gpu || fs::exists(own)) return std::make_tuple(own, p.golden, p.max_loss_rel_error);
    return std::make_tuple(p.cpu_golden_path, p.cpu_golden, p.max_loss_rel_error_vs_cpu);
  };
  auto check = [&] {
    for (const auto& c : f.checks)
      if (std::find(all_checks().begin(), all_checks().end(), c) == all_checks().end())
        usage_error("--checks: unknown check '{}' (known: health, gemm, memory, allreduce, p2p, train, internode, "
                    "burnin)",
                    c);
    if (!world && std::find(f.checks.begin(), f.checks.end(), "internode") != f.checks.end())
      usage_error("--checks internode: measures between nodes; launch ptdp accept over them (srun, or mpirun with "
                  "several processes), one process per node");
    if (f.threads < 0) usage_error("--threads {} must be positive (0: every core)", f.threads);
    if (f.level < 0 || f.level > 3)
      usage_error("--level {}: 1 (the GPUs' health, seconds), 2 (health, then every check) or 3 (level 2, then the "
                  "burn-in)",
                  f.level);
    const bool burnin_asked = f.level == 3 || std::find(f.checks.begin(), f.checks.end(), "burnin") != f.checks.end();
    if (f.burnin_seconds != 0 && !burnin_asked)
      usage_error("--burn-in-seconds: only with --level 3 or --checks burnin (the burn-in it times)");
    if (f.burnin_seconds < 0 || !std::isfinite(f.burnin_seconds))
      usage_error("--burn-in-seconds {} must be positive", f.burnin_seconds);
    if (f.level != 0 && !f.checks.empty()) usage_error("--level and --checks: give one of them, not both");
    p = load_accept_profile(f.hardware);
    gpu = p.kind == "gpu";
    const bool health_asked =
        f.level == 1 || std::find(f.checks.begin(), f.checks.end(), "health") != f.checks.end();
    if (health_asked && !gpu)
      usage_error("{}: the health check reads GPUs through NVML; profile {} is a CPU profile",
                  f.level == 1 ? "--level 1" : "--checks health", p.name);
    if (!f.out.empty()) out = report_paths(f.out);
    if (!f.write_golden.empty()) check_output_file(f.write_golden, "--write-golden");
    if ((wanted("train") || wanted("burnin")) && f.write_golden.empty())
      golden = read_golden(std::get<0>(golden_source()));  // bad file: exit 2 first
    // The health pre-flight reads NVML before anything starts a CUDA context (this process would count).
    if (wanted("health")) health = read_gpu_health(&health_why);
    benchmarks = wanted("gemm") || wanted("memory") || wanted("allreduce") || wanted("p2p") || wanted("train") ||
                 wanted("burnin") || wanted("internode") || !f.write_golden.empty();
    if (gpu && benchmarks)
      require_gpus(f.hardware, p, wanted("allreduce") || wanted("p2p"));  // no GPU: exit 2, nothing written
    else if (gpu && health.empty())  // the health alone, and no driver to ask: nothing to measure
      usage_error("--hardware {}: a GPU acceptance profile ({}), and no GPU here to check the health of ({})",
                  f.hardware, p.device, health_why);
  };
  if (world)
    agree(*world, check);
  else
    check();

  const int threads = f.threads > 0 ? f.threads : std::max(1, int(std::thread::hardware_concurrency()));
  const int reps = f.quick ? 3 : 10;
  // In a fleet, rank 0 speaks for every process: the others print nothing and write nothing.
  const bool speaks = !world || world->rank() == 0;
  std::optional<ScopedQuietStdout> quiet;
  if (!speaks) quiet.emplace();
  // A GPU fleet launched one process per GPU (several processes on a node, srun
  // --ntasks-per-node=8): each process checks its own GPU, and each GPU is a row of the report.
  int fleet_gpu = -1;
  if (world && gpu && benchmarks) {
    const std::string node = fleet_node_name();
    const FleetPlace place = fleet_place(*world, node);
    const int visible = visible_gpus(nullptr);
    if (visible > 1 && place.per_node > visible)
      usage_error("--hardware {}: {} processes of this job run on node {}, which has {} GPUs: launch one process per "
                  "node or at most one per GPU",
                  f.hardware, place.per_node, node, visible);
    if (place.per_node > 1) {
      fleet_gpu = visible == 1 ? 0 : place.local;  // the launcher gave each process one GPU, or it takes its own
      check_one_gpu(fleet_gpu);
    }
  }
  Provenance pv;
  if (gpu) pv.device = benchmarks ? gpu_description() : health_description(health);
  if (fleet_gpu >= 0) pv.device = fmt::format("GPU {} of {}", fleet_gpu, pv.device);
  if (gpu && benchmarks) pv.software = gpu_software();
  if (gpu && !benchmarks)
    fmt::print("ptdp accept: profile {} ({}), health of {} on {}\n", p.name, p.path, pv.device, pv.host);
  else if (gpu)
    fmt::print("ptdp accept: profile {} ({}), {} on {}, {} repetitions per measurement (best counts){}\n", p.name,
               p.path, gpu_summary(p), pv.host, reps, f.quick ? ", --quick" : "");
  else
    fmt::print("ptdp accept: profile {} ({}), {} on {}, {} thread(s), {} repetitions per measurement (best counts){}\n",
               p.name, p.path, pv.device, pv.host, threads, reps, f.quick ? ", --quick" : "");
  if (world)
    fmt::print("fleet: {} processes ({} comm); each runs the node checks, then the inter-node ones; rank 0 "
               "gathers the verdicts\n",
               world->size(), world->backend());
  std::fflush(stdout);

  std::vector<Check> checks;
  if (wanted("health")) {
    // Printed at once: it explains a FAIL of the benchmarks that follow.
    checks = health_checks(health, health_why);
    checks.push_back(host_load_check(read_host_load(), p.max_load_per_cpu));
    for (const Check& c : checks) fmt::print("health {} {}: {}\n", c.metric, c.status(), c.detail);
    std::fflush(stdout);
  }
  if (gpu && benchmarks) {
    std::vector<Check> measured = gpu_checks(p, wanted, reps);
    checks.insert(checks.end(), measured.begin(), measured.end());
  }
  auto at_least = [](Check c) {
    c.op = ">=";
    c.pass = c.value >= c.threshold;
    return c;
  };
  if (!gpu && wanted("gemm")) {
    set_cpu_threads(threads);
    const Samples s = measure_gemm(p.gemm_m, p.gemm_n, p.gemm_k, reps);
    checks.push_back(at_least({"gemm", "sgemm_gflops", "GFLOP/s", "", s.best(), p.min_gemm_gflops.value, false,
                               fmt::format("OpenBLAS sgemm {}x{}x{}{}, {} threads, best of {} (median {:.1f})",
                                           p.gemm_m, p.gemm_n, p.gemm_k,
                                           p.gemm_what.empty() ? "" : " (" + p.gemm_what + ")", threads, reps,
                                           s.median()),
                               p.min_gemm_gflops.source}));
  }
  if (!gpu && wanted("memory")) {
    set_cpu_threads(threads);
    const Samples s = measure_triad(p.triad_mib, reps);
    checks.push_back(at_least({"memory", "stream_triad_gbs", "GB/s", "", s.best(), p.min_triad_gbs.value, false,
                               fmt::format("STREAM triad, 3 arrays of {} MiB, {} threads, best of {} (median {:.1f})",
                                           p.triad_mib, threads, reps, s.median()),
                               p.min_triad_gbs.source}));
  }
  if (!gpu && wanted("allreduce")) {
    const CommResult r = measure_allreduce(p.ranks, p.allreduce_mib, reps);
    Check c = at_least({"allreduce", "allreduce_busbw_gbs", "GB/s", "", r.s.best(), p.min_allreduce_busbw_gbs.value,
                        false,
                        fmt::format("local comm, {} ranks, {} MiB f32 in place, busbw = algbw x 2(n-1)/n, best of {} "
                                    "(median {:.2f}), {} wrong elements",
                                    p.ranks, p.allreduce_mib, reps, r.s.median(), r.wrong),
                        p.min_allreduce_busbw_gbs.source});
    c.pass = c.pass && r.wrong == 0;
    checks.push_back(c);
  }
  if (!gpu && wanted("p2p")) {
    const CommResult r = measure_p2p(p.ranks, p.p2p_mib, reps);
    Check c = at_least({"p2p", "p2p_gbs", "GB/s", "", r.s.best(), p.min_p2p_gbs.value, false,
                        fmt::format("local comm, rank 0 -> rank 1, {} MiB, best of {} (median {:.2f}), {} wrong "
                                    "elements",
                                    p.p2p_mib, reps, r.s.median(), r.wrong),
                        p.min_p2p_gbs.source});
    c.pass = c.pass && r.wrong == 0;
    checks.push_back(c);
  }
  if (!f.write_golden.empty()) {
    GoldenRun g;  // the fixed flags of docs/ACCEPTANCE.md
    g.losses = train_losses(g, 20, gpu);
    write_golden(f.write_golden, g);
    fmt::print("wrote {} ({} iterations of {}, b={} B={} seed {} lr {} on {})\n", f.write_golden, g.losses.size(),
               g.model, g.micro_batch, g.global_batch, g.seed, g.lr,
               gpu ? fmt::format("the CUDA backend, GPU {}", checked_gpus().at(0))
                   : fmt::format("{} thread(s)", g.omp_threads));
    if (wanted("train") || wanted("burnin")) golden = read_golden(std::get<0>(golden_source()));
  }
  if (wanted("train")) {
    const GoldenRun& g = *golden;
    const auto source = golden_source();
    const std::string& golden_name = std::get<1>(source);
    const Threshold& tolerance = std::get<2>(source);
    const std::vector<double> got = train_losses(g, int(g.losses.size()), gpu);
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double e = std::isfinite(got[i]) ? std::fabs(got[i] - g.losses[i]) / std::fabs(g.losses[i])
                                             : std::numeric_limits<double>::infinity();
      if (!(e <= worst)) {
        worst = e;
        at = i;
      }
    }
    const std::string where =
        gpu ? fmt::format("f32 on the CUDA backend, GPU {}", checked_gpus().at(0))
            : fmt::format("{} thread(s)", g.omp_threads);
    const std::string against =
        golden_name == p.golden ? golden_name
                                : fmt::format("{} ({} does not exist yet: record it with --write-golden)", golden_name,
                                              p.golden);
    Check c{"train", "loss_max_rel_error", "", "<=", worst, tolerance.value, false,
            fmt::format("{} {} iterations (b={} B={} seed {} lr {}, {}) against {}; worst at iteration {}: "
                        "loss {:.7f}, golden {:.7f}",
                        g.model, got.size(), g.micro_batch, g.global_batch, g.seed, g.lr, where, against, at + 1,
                        got[at], g.losses[at]),
            tolerance.source};
    c.pass = worst <= c.threshold;
    checks.push_back(c);
  }

  if (wanted("burnin")) {
    const GoldenRun& g = *golden;
    const auto source = golden_source();
    const std::string& golden_name = std::get<1>(source);
    const Threshold& tolerance = std::get<2>(source);
    const double seconds = f.burnin_seconds > 0 ? f.burnin_seconds : p.burnin_seconds;
    const std::string unit = gpu ? "TFLOP/s" : "GFLOP/s";
    fmt::print("burn-in: rounds of {:.0f} s of the GEMM{}, each then {} {} iterations against {}, for {:.0f} s\n",
               std::min(p.burnin_round_seconds, seconds), gpu ? " on every GPU at once" : "", g.model,
               g.losses.size(), golden_name, seconds);
    std::fflush(stdout);
    auto load = [&](double load_seconds, BurnInRound& r) {
      if (gpu) {
        std::string why;
        const GemmLoad l = gemm_load(p, load_seconds, [&] { r.sensors = read_gpu_health(&why); });
        r.gemm_rate = l.tflops;
        r.gemm_checked = l.checked;
        r.gemm_wrong = l.wrong;
        return;
      }
      // The CPU: the GEMM timed again and again; the rate is every GEMM's FLOPs over their time.
      set_cpu_threads(threads);
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(load_seconds);
      double inverse = 0;
      int n = 0;
      do {
        inverse += 1 / measure_gemm(p.gemm_m, p.gemm_n, p.gemm_k, 1).best();
        ++n;
      } while (std::chrono::steady_clock::now() < until);
      r.gemm_rate = n / inverse;
    };
    const std::vector<BurnInRound> rounds = run_burnin(seconds, p.burnin_round_seconds, unit, load,
                                                       [&] { return train_losses(g, int(g.losses.size()), gpu); });
    const std::vector<Check> c =
        burnin_checks(rounds, unit, g.losses, golden_name, p.burnin_min_sustained, tolerance);
    checks.insert(checks.end(), c.begin(), c.end());
  }
  if (wanted("internode")) {
    // A GPU fleet measures between its GPUs over NCCL, each process from its first checked GPU.
    const std::string node = fleet_node_name();
    const std::vector<Check> between = gpu ? gpu_internode_checks(*world, node, p, reps, checked_gpus().at(0))
                                           : internode_checks(*world, node, p, reps);
    checks.insert(checks.end(), between.begin(), between.end());
  }
  if (world) return fleet_report(*world, p, checks, pv, out, fleet_gpu);

  bool passed = true;  // every check that ran passed (SKIP neither passes nor fails)
  std::string failed, skipped;
  size_t ran = 0, n_failed = 0;
  fmt::print("{:<10} {:<20} {:>12} {:<8} {:>2} {:>10}  {:<6} {}\n", "check", "metric", "measured", "unit", "",
             "threshold", "result", "detail");
  for (const Check& c : checks) {
    const std::string measured = c.skipped ? "-" : fmt::format("{:.4g}", c.value);
    fmt::print("{:<10} {:<20} {:>12} {:<8} {:>2} {:>10.4g}  {:<6} {}\n", c.name, c.metric, measured, c.unit, c.op,
               c.threshold, c.status(), c.detail);
    if (c.skipped) {
      skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", c.name);
      continue;
    }
    ++ran;
    if (!c.pass) {
      passed = false;
      ++n_failed;
    }
  }
  failed = failed_checks_text(checks);
  const size_t n_skipped = checks.size() - ran;
  if (ran == 0) passed = false;  // nothing measured is not a pass
  const std::string skip_note = n_skipped ? fmt::format("; {} skipped: {}", n_skipped, skipped) : "";
  if (!out.first.empty()) {
    write_user_file(out.first, report_json(p, checks, pv, threads, f.quick, passed));
    write_user_file(out.second, report_csv(p, checks, pv));
    fmt::print("reports: {} and {}\n", out.first, out.second);
  }
  if (ran == 0) fmt::print("ACCEPT: FAIL (no check ran{})\n", skip_note);
  else if (passed) fmt::print("ACCEPT: PASS ({} of {} checks{})\n", ran, ran, skip_note);
  else fmt::print("ACCEPT: FAIL ({} failed: {}{})\n", n_failed, failed, skip_note);
  return passed ? 0 : 1;
}

}  // namespace

// Adds the `accept` subcommand; returns it and the function that runs it once parsed.
std::pair<CLI::App*, std::function<int(Communicator*)>> add_accept_command(CLI::App& app) {
  auto f = std::make_shared<AcceptFlags>();
  CLI::App* cmd = app.add_subcommand(
      "accept", "hardware acceptance: GEMM rate, memory bandwidth, all-reduce and p2p bandwidth in a node, and a "
                "training smoke test against golden losses, each against a threshold of the profile; exit 1 on FAIL");
  cmd->add_option("--hardware", f->hardware,
                  "acceptance profile: a name (hardware/NAME-accept.toml, e.g. cpu) or a .toml file")
      ->required();
  cmd->add_option("--out", f->out, "write the JSON report to FILE and the CSV report beside it (FILE with .csv)");
  cmd->add_flag("--quick", f->quick, "3 repetitions per measurement instead of 10 (same sizes, same thresholds)");
  cmd->add_option("--threads", f->threads, "CPU threads for the GEMM and memory checks (default: every core)");
  cmd->add_option("--checks", f->checks,
                  "run only these checks: health, gemm, memory, allreduce, p2p, train, internode (between nodes, "
                  "when launched over several), burnin (the GEMM and the golden run repeated: --burn-in-seconds)")
      ->delimiter(',');
  cmd->add_option("--level", f->level,
                  "1: the GPUs' health alone (NVML: other processes, ECC, row remapping, PCIe link, clock "
                  "slowdowns; seconds); 2 (default): health, then every check; 3: level 2, then the burn-in (the GEMM "
                  "and the golden run repeated for --burn-in-seconds: rates that sag as the part heats up, results "
                  "that go wrong after a while)");
  cmd->add_option("--burn-in-seconds", f->burnin_seconds,
                  "how long the burn-in runs (default: the profile's accept.burnin.seconds, else 600)");
  cmd->add_option("--write-golden", f->write_golden,
                  "train tiny with the fixed golden flags and write its 20 losses to FILE (results/golden/*.csv); "
                  "on the CUDA backend (GPU 0) for a GPU profile");
  return {cmd, [f](Communicator* world) { return accept(*f, world); }};
}

}  // namespace ptdp
