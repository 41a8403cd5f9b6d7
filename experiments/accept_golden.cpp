#include "experiments/accept_golden.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "core/backend/backend.h"
#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/common/error.h"
#include "core/results/csv_reader.h"
#include "core/results/output_files.h"
#include "core/train/run.h"
#include "experiments/accept_cpu.h"
#include "experiments/accept_gpu.h"

namespace ptdp {

namespace {

const std::vector<std::string>& golden_columns() {
  static const std::vector<std::string> c = {"model", "data",  "micro_batch", "global_batch", "seed",
                                             "lr",    "omp_threads", "iteration", "loss"};
  return c;
}

// A golden run is a smoke test of seconds: a byte-level model, a small batch, a few iterations.
constexpr int kMaxGoldenIterations = 1000, kMaxGoldenBatch = 1024;
bool small_model(const std::string& model) {
  for (const char* m : {"tiny", "small", "llama-tiny", "llama-tiny-gqa"})
    if (model == m) return true;
  return false;
}

// The run's settings (the first row), each rule it breaks a UsageError naming the file, the line
// and the column: a run that cannot train as written would read as a machine that fails.
void check_golden_run(const GoldenRun& g, const std::string& path, int line) {
  if (!small_model(g.model))
    usage_error("{}:{}: column 'model' must be tiny, small, llama-tiny or llama-tiny-gqa (a smoke test of seconds; "
                "got '{}')",
                path, line, g.model);
  if (g.data != "synthetic") usage_error("{}:{}: column 'data' must be synthetic (got '{}')", path, line, g.data);
  if (g.micro_batch < 1 || g.global_batch < g.micro_batch || g.global_batch % g.micro_batch || g.omp_threads < 1)
    usage_error("{}:{}: micro_batch, global_batch and omp_threads must be positive, global_batch a multiple of "
                "micro_batch",
                path, line);
  if (g.global_batch > kMaxGoldenBatch)
    usage_error("{}:{}: column 'global_batch' = {} must be at most {}", path, line, g.global_batch, kMaxGoldenBatch);
  if (g.omp_threads > max_threads())
    usage_error("{}:{}: column 'omp_threads' = {} must be at most {} ({} x the hardware threads here)", path, line,
                g.omp_threads, max_threads(), kThreadsPerHardwareThread);
  if (!std::isfinite(g.lr) || !(g.lr > 0) || g.lr > 1)
    usage_error("{}:{}: column 'lr' = {} must be in (0, 1] (a learning rate the run can train with)", path, line, g.lr);
}

}  // namespace

GoldenRun read_golden(const std::string& path) {
  const CsvTable t = CsvTable::read(path, golden_columns());
  if (t.size() == 0) usage_error("{}: no rows (golden losses, one row per iteration)", path);
  if (t.size() > size_t(kMaxGoldenIterations))
    usage_error("{}: {} rows: at most {} iterations (golden losses, one row per iteration)", path, t.size(),
                kMaxGoldenIterations);
  GoldenRun g;
  g.model = t.text(0, "model");
  g.data = t.text(0, "data");
  auto small_int = [&](const char* column) {  // out of int's range: refused below as too large or not positive
    return int(std::clamp<int64_t>(t.integer(0, column), -1, int64_t(1) << 30));
  };
  g.micro_batch = small_int("micro_batch");
  g.global_batch = small_int("global_batch");
  g.seed = uint64_t(t.integer(0, "seed"));
  g.lr = t.number(0, "lr");
  g.omp_threads = small_int("omp_threads");
  check_golden_run(g, path, t.line(0));
  for (size_t i = 0; i < t.size(); ++i) {
    for (const char* c : {"model", "data", "micro_batch", "global_batch", "seed", "lr", "omp_threads"})
      if (t.text(i, c) != t.text(0, c))
        usage_error("{}:{}: column '{}' differs from the first row's ('{}' vs '{}'): one run per file", path,
                    t.line(i), c, t.text(i, c), t.text(0, c));
    if (t.integer(i, "iteration") != int64_t(i) + 1)
      usage_error("{}:{}: column 'iteration' must count 1, 2, 3, ... (got {})", path, t.line(i),
                  t.text(i, "iteration"));
    g.losses.push_back(t.number(i, "loss"));
    if (!std::isfinite(g.losses.back()) || !(g.losses.back() > 0))
      usage_error("{}:{}: column 'loss' = {} must be a positive number (a cross-entropy the train check divides by)",
                  path, t.line(i), t.text(i, "loss"));
  }
  return g;
}

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

GoldenSource golden_source(const AcceptProfile& p) {
  const std::string own = resolve_data_path(p.golden);
  if (p.kind != "gpu" || std::filesystem::exists(own)) return {own, p.golden, p.max_loss_rel_error};
  return {p.cpu_golden_path, p.cpu_golden, p.max_loss_rel_error_vs_cpu};
}

Check train_check(const AcceptProfile& p, const GoldenRun& g, const GoldenSource& src, const std::vector<double>& got,
                  const std::string& where) {
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
  const std::string against =
      src.name == p.golden
          ? src.name
          : fmt::format("{} ({} does not exist yet: record it with --write-golden)", src.name, p.golden);
  Check c{"train", "loss_max_rel_error", "", "<=", worst, src.tolerance.value, false,
          fmt::format("{} {} iterations (b={} B={} seed {} lr {}, {}) against {}; worst at iteration {}: "
                      "loss {:.7f}, golden {:.7f}",
                      g.model, got.size(), g.micro_batch, g.global_batch, g.seed, g.lr, where, against, at + 1,
                      got[at], g.losses[at]),
          src.tolerance.source};
  c.pass = worst <= c.threshold;
  return c;
}

}  // namespace ptdp
