// `ptdp reproduce NAME|all --mode simulate|run [--scale paper|small] [--out DIR] [--hardware PROFILE]
// [--force] [--dry-run]`: runs the sweep of one paper artefact (experiments/specs/NAME.toml), or
// of all of them, and appends one result row per configuration to DIR/NAME.csv. simulate: the
// performance model (core/sim) on a hardware profile; run: the real training core (CPU ranks as
// threads at --scale small; at paper scale a cluster launch, refused here). Configurations already
// in the CSV are skipped (resume) unless --force; rows are appended atomically one at a time, so
// an interrupted sweep keeps every completed row.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/ranges.h>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/common/source_tree.h"
#include "core/common/error.h"
#include "core/results/csv_reader.h"
#include "core/results/provenance.h"
#include "core/config/results_csv.h"
#include "core/sim/cost_model.h"
#include "core/sim/hardware.h"
#include "core/sim/simulator.h"
#include "core/sim/training_time.h"
#include "experiments/commands.h"
#include "experiments/interrupt.h"
#include "experiments/rank_device.h"
#include "experiments/reproduce_llama.h"
#include "experiments/reproduce_llama_data.h"
#include "experiments/reproduce_plan.h"
#include "experiments/result_row.h"
#include "experiments/sweep.h"
#ifdef PTDP_HAVE_MPI
#include "core/comm/mpi/mpi_comm.h"
#endif

namespace ptdp {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct ReproduceFlags {
  std::string name;
  std::string mode = "simulate";
  std::string scale = "paper";
  std::string out = "results";
  std::string hardware = "a100-selene";
  bool force = false;
  bool dry_run = false;
  bool plan_jobs = false;
  int gpus_per_node = 8;
};



// A row being written is finished before an interrupt ends the process (experiments/interrupt.h).
void write_row(const std::string& path, const ResultRow& row, bool replace) {
  deferring_interrupts([&] { put_sweep_row(path, row, replace); });
}

// ---- formatting ----------------------------------------------------------------------------------

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  const long t = std::lround(s);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

std::string layout(const RunConfig& c) {
  const ParallelConfig& p = c.par;
  return fmt::format("t={} p={} d={} v={} b={} B={} m={} {} recompute={} s/g={}{}", p.tp, p.pp, p.dp, p.vpp,
                     p.micro_batch, p.global_batch, p.num_microbatches(), p.schedule, enum_name(p.recompute),
                     p.scatter_gather ? "on" : "off", p.zero ? fmt::format(" zero={}", p.zero) : std::string());
}

const char* metric_unit(const std::string& metric) {
  if (metric == "tflops_per_gpu") return "TFLOP/s per GPU";
  if (metric == "model_tflops_per_gpu") return "model TFLOP/s per GPU (no recomputation counted)";
  if (metric == "iter_time_s") return "seconds per iteration";
  if (metric == "layer_fwd_ms") return "ms, forward of one layer";
  if (metric == "layer_bwd_ms") return "ms, backward of one layer (with its recomputation)";
  if (metric == "seq_per_s") return "sequences/s";
  if (metric == "bubble_fraction") return "bubble t_pb/t_id, (p-1)/m";
  return "sequences/s (normalised per series at b = 1)";
}

// A series' name in the printed lines: none for a spec of one series (its placeholder name,
// "(single series)", only pairs the rows with the paper's points).
std::string series_label(const SweepSpec& spec, const std::string& series) {
  return spec.series.size() == 1 ? std::string() : series;
}


// ---- the paper's values --------------------------------------------------------------------------

// Tables 1 and 2 also give the training time for this many tokens (the paper's Eq. (4)).
constexpr double kDaysTokens = 300e9;

std::vector<std::string> paper_dirs() {
  std::vector<std::string> d = {"results/paper"};
  if (const fs::path root = source_tree(); !root.empty()) d.push_back((root / "results" / "paper").string());
  return d;
}

// Table 2's series as Figure 10 names them: "ZeRO-3, 175B", "PTD-P, 530B".
std::string table2_series(const CsvTable& t, size_t i) {
  return t.text(i, "scheme") + (t.number(i, "params_b") < 300 ? ", 175B" : ", 530B");
}

// (series, x) -> the days to train on 300B tokens at the paper's throughput: Table 2's column;
// for Table 1 (which has none) Eq. (4) with its throughput, parameters and GPUs.
std::map<std::pair<std::string, std::string>, double> paper_days(const SweepSpec& spec) {
  std::map<std::pair<std::string, std::string>, double> v;
  for (const auto& dir : paper_dirs()) {
    std::error_code ec;
    const std::string path = dir + "/" + spec.paper + ".csv";
    if (!fs::exists(path, ec)) continue;
    if (spec.paper == "table1") {
      const CsvTable t = CsvTable::read(path, {"params_b", "gpus", "tflops_per_gpu"});
      for (size_t i = 0; i < t.size(); ++i)
        v[{spec.series.front().name, t.text(i, "params_b")}] =
            sim::training_days_eq4(kDaysTokens, t.number(i, "params_b") * 1e9, t.number(i, "gpus"),
                                   t.number(i, "tflops_per_gpu") * 1e12);
    } else if (spec.paper == "table2") {
      const CsvTable t = CsvTable::read(path, {"scheme", "params_b", "gpus", "days_300b_tokens"});
      for (size_t i = 0; i < t.size(); ++i) v[{table2_series(t, i), t.text(i, "gpus")}] = t.number(i, "days_300b_tokens");
    }
    break;
  }
  return v;
}

// (series, x) -> the paper's value; empty when the paper's data files are not found.
std::map<std::pair<std::string, std::string>, double> paper_values(const SweepSpec& spec) {
  std::map<std::pair<std::string, std::string>, double> v;
  for (const auto& dir : paper_dirs()) {
    std::error_code ec;
    if (spec.paper == "table1") {
      const std::string path = dir + "/table1.csv";
      if (!fs::exists(path, ec)) continue;
      const CsvTable t = CsvTable::read(path, {"params_b", "tflops_per_gpu"});
      for (size_t i = 0; i < t.size(); ++i) v[{spec.series.front().name, t.text(i, "params_b")}] = t.number(i, "tflops_per_gpu");
    } else if (spec.paper == "table2") {
      const std::string path = dir + "/table2.csv";
      if (!fs::exists(path, ec)) continue;
      const CsvTable t = CsvTable::read(path, {"scheme", "params_b", "gpus", "tflops_per_gpu"});
      for (size_t i = 0; i < t.size(); ++i) v[{table2_series(t, i), t.text(i, "gpus")}] = t.number(i, "tflops_per_gpu");
    } else {
      // Another paper's artefacts have their own file (kor22.csv, mcore_h100.csv); the SC'21
      // figures share figures.csv. Both: figure, series, x, value.
      std::string path = dir + "/" + spec.paper + ".csv";
      if (!fs::exists(path, ec)) path = dir + "/figures.csv";
      if (!fs::exists(path, ec)) continue;
      const CsvTable t = CsvTable::read(path, {"figure", "series", "x", "value"});
      for (size_t i = 0; i < t.size(); ++i)
        if (t.text(i, "figure") == spec.paper) v[{t.text(i, "series"), t.text(i, "x")}] = t.number(i, "value");
    }
    break;
  }
  return v;
}

// ---- one sweep -----------------------------------------------------------------------------------

struct Job {
  SweepSpec spec;
  std::vector<SweepPoint> points;
  std::string csv;
  std::optional<sim::HardwareProfile> hw;  // simulate: --hardware, else the spec's, else a100-selene
};

struct Context {
  std::string mode;
  SweepScale scale = SweepScale::Paper;
  bool force = false;
  std::optional<sim::HardwareProfile> hw;  // simulate
  Communicator* world = nullptr;           // run under mpirun/srun with several ranks (null: local ranks)
  int launch_ranks = 0;                    // the launcher's world size (0: not launched, ranks as threads)
  bool report = true;                      // world rank 0
  Clock::time_point start = Clock::now();
  std::vector<std::string> no_fit;         // specs this launch's size fits nothing of (run_job)
};

// A metric's unit in this sweep's lines: "per GPU" is "per CPU rank" where the ranks are CPU ones
// (--mode run --scale small, or the cpu hardware profile).
std::string metric_unit(const std::string& metric, const Context& ctx) {
  std::string u = metric_unit(metric);
  const bool cpu = ctx.mode == "run" ? ctx.scale == SweepScale::Small : ctx.hw && ctx.hw->kind == "cpu";
  if (const size_t at = u.find("per GPU"); cpu && at != std::string::npos) u.replace(at, 7, "per CPU rank");
  return u;
}

// The configuration as the selected mode runs it.
RunConfig as_run(const RunConfig& in, const Context& ctx, SweepKind kind) {
  RunConfig c = in;
  if (ctx.mode == "simulate") {
    const sim::HardwareProfile& hw = *ctx.hw;
    c.backend = hw.kind == "cpu" ? BackendKind::Cpu : BackendKind::Cuda;
    if (!(hw.peak(c.precision) > 0)) c.precision = hw.default_precision;
    if (c.backend == BackendKind::Cpu) c.precision = Precision::F32;
  } else if (ctx.scale == SweepScale::Small) {  // the CPU backend, f32, ranks as threads or MPI processes
    c.backend = BackendKind::Cpu;
    c.precision = Precision::F32;
    c.comm = ctx.world ? CommKind::Mpi : CommKind::Local;
  } else {  // one GPU per rank: NCCL under a launcher, or the one GPU of a one-rank layout here
    c.backend = BackendKind::Cuda;
    c.comm = ctx.world ? CommKind::Nccl : CommKind::Local;
  }
  c.ranks = 0;
  c.csv.clear();
  if (kind == SweepKind::Train) validate_run(c);
  else c.ranks = c.par.tp * c.par.cp * c.par.pp * c.par.dp;
  return c;
}

// The row a configuration will write, without results: its key identifies it in the CSV.
ResultRow planned_row(const RunConfig& c, const Context& ctx, SweepKind kind) {
  if (kind == SweepKind::Bubble) {
    ResultRow r;
    r.set("experiment", c.experiment);
    r.set("mode", std::string("simulate"));
    r.set("backend", std::string("analytic"));
    r.set("model", std::string("analytic"));
    r.set("gpus", c.ranks);
    r.set("tp", c.par.tp);
    r.set("pp", c.par.pp);
    r.set("dp", c.par.dp);
    r.set("vpp", c.par.vpp);
    r.set("micro_batch", c.par.micro_batch);
    r.set("global_batch", c.par.global_batch);
    r.set("num_microbatches", c.par.num_microbatches());
    r.set("schedule", c.par.schedule);
    return r;
  }
  if (ctx.mode == "simulate") return make_profile_row(c, *ctx.hw, 1.0);
  return make_result_row(c, ctx.mode, 1.0);
}

struct Outcome {
  std::optional<ResultRow> row;  // nothing: no row (out of memory, skipped)
  std::string note;              // why there is no row
};

Outcome simulate_train(const RunConfig& c, const Context& ctx) {
  const sim::SimResult r = sim::simulate(c, *ctx.hw);
  if (!r.memory.fits) return {std::nullopt, r.memory.describe(ctx.hw->device)};
  return {make_simulated_row(c, *ctx.hw, r), ""};
}

// Fig. 6: (p - 1)/m of the configuration.
Outcome bubble_row(const RunConfig& c, const Context& ctx) {
  ResultRow r = planned_row(c, ctx, SweepKind::Bubble);
  const ParallelConfig& p = c.par;
  r.set("bubble_fraction", double(p.pp - 1) / p.num_microbatches());
  r.set("git_sha", git_sha());
  r.set("host", host_name());
  r.set("timestamp", utc_timestamp());
  return {r, ""};
}

// Eq. (1): (m + p - 1)(t_f + t_b) for a stage with stage_layers of the layers whose forward and
// backward (with recomputation) per micro-batch take fwd_s and bwd_s.
double eq1_seconds(const RunConfig& c, double tf, double tb) {
  return (c.par.num_microbatches() + c.par.pp - 1) * (tf + tb);
}

Outcome simulate_eq1(const RunConfig& c, const Context& ctx) {
  RunConfig one = c;  // the cost model on one stage: per-layer times do not depend on p
  one.par.pp = 1;
  one.par.vpp = 1;
  one.par.schedule = ScheduleKind::OneFOneB;
  one.ranks = 0;
  validate_run(one);
  const sim::CostModel cm(one, *ctx.hw);
  const double stage_layers = double(c.model.layers) / c.par.pp;
  const double tf = cm.layer.forward.total() * stage_layers;
  const double tb = (cm.layer.backward.total() + cm.layer.recompute.total()) * stage_layers;
  ResultRow r = make_profile_row(c, *ctx.hw, eq1_seconds(c, tf, tb) * 1e3);
  const int m = c.par.num_microbatches();
  r.set("bubble_fraction", double(c.par.pp - 1) / m);
  r.set("device", ctx.hw->device);
  r.set("fwd_ms", m * tf * 1e3);
  r.set("bwd_ms", m * tb * 1e3);
  return {r, ""};
}

// Micro-batches of one Eq. (1) measurement: at least 16 sequences, so that small b are timed over
// several micro-batches.
int eq1_measured_microbatches(int b) { return std::max(1, 16 / b); }

// The one-rank run that measures t_f(b), t_b(b) for an Eq. (1) point (validated).
RunConfig eq1_measurement(const RunConfig& c) {
  RunConfig one = c;
  one.par.tp = one.par.pp = one.par.dp = one.par.vpp = 1;
  one.par.schedule = ScheduleKind::OneFOneB;
  one.par.global_batch = c.par.micro_batch * eq1_measured_microbatches(c.par.micro_batch);
  one.ranks = 0;
  one.comm = CommKind::Local;
  validate_run(one);
  return one;
}

// Fig. 8 at small scale: t_f(b), t_b(b) measured on one CPU rank (the forward and backward time
// per micro-batch of b sequences, over at least 16 sequences), once per b.
Outcome run_eq1(const RunConfig& c, std::map<int, ResultRow>& measured) {
  const int b = c.par.micro_batch;
  const int mb = eq1_measured_microbatches(b);
  if (!measured.count(b)) {
    std::optional<ResultRow> row = run_training(eq1_measurement(c), nullptr, false);
    PTDP_CHECK(row.has_value(), "one local rank returned no row");
    measured[b] = *row;
  }
  const ResultRow& mr = measured.at(b);
  const double p = c.par.pp;
  const double tf = std::stod(mr.get("fwd_ms")) / 1e3 / mb / p, tb = std::stod(mr.get("bwd_ms")) / 1e3 / mb / p;
  ResultRow r = make_result_row(c, "run", eq1_seconds(c, tf, tb) * 1e3);
  const int m = c.par.num_microbatches();
  r.set("bubble_fraction", double(c.par.pp - 1) / m);
  for (const char* k : {"loss", "device", "peak_mem_gb"}) r.set(k, mr.get(k));
  r.set("fwd_ms", m * tf * 1e3);
  r.set("bwd_ms", m * tb * 1e3);
  return {r, ""};
}

// Reads back the sweep's rows of this mode (and profile) and prints them against the paper.
void print_summary(const Job& job, const Context& ctx, const std::vector<std::string>& keys) {
  const std::string col = metric_column(job.spec.metric);
  std::map<std::string, std::string> series_metric;  // series -> its metric
  for (const auto& se : job.spec.series) series_metric[se.name] = se.metric;
  std::error_code ec;
  if (!fs::exists(job.csv, ec)) return;
  // Tables 1 and 2: also the days to train on 300B tokens by Eq. (4), ours against the paper's.
  // (At the paper's scale only: a scaled-down copy's throughput says nothing about the days.)
  const bool days = (job.spec.paper == "table1" || job.spec.paper == "table2") && col == "tflops_per_gpu" &&
                    ctx.scale == SweepScale::Paper;
  std::vector<std::string> cols;
  for (const auto& [name, m] : series_metric) cols.push_back(metric_column(m));
  if (days) cols.push_back("params");
  const CsvTable t = read_sweep_keys(job.csv, cols);
  // key -> the last row's metrics by column (and days)
  std::map<std::string, std::map<std::string, std::optional<double>>> metrics;
  std::map<std::string, std::optional<double>> value, day;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string k = sweep_row_key(t, i);
    for (const auto& [name, m] : series_metric) metrics[k][m] = t.number_or_empty(i, metric_column(m));
    value[k] = metrics[k][job.spec.metric];
    if (days && value[k]) {
      const auto params = t.number_or_empty(i, "params");
      day[k] = params ? std::optional<double>(sim::training_days_eq4(kDaysTokens, *params, t.number(i, "gpus"),
                                                                     *value[k] * 1e12))
                      : std::nullopt;
    }
  }
  std::vector<std::optional<double>> ours(job.points.size()), ours_days(job.points.size());
  for (size_t i = 0; i < job.points.size(); ++i)
    if (metrics.count(keys[i])) {
      const std::string& m = series_metric[job.points[i].series];
      ours[i] = metrics[keys[i]][m];
      if (ours[i]) *ours[i] *= metric_scale(m);
      if (days && day.count(keys[i])) ours_days[i] = day[keys[i]];
    }
  if (job.spec.metric == "normalized_throughput") {  // each series over its x = 1 point
    std::map<std::string, double> base;
    for (size_t i = 0; i < job.points.size(); ++i)
      if (job.points[i].x == "1" && ours[i]) base[job.points[i].series] = *ours[i];
    for (size_t i = 0; i < job.points.size(); ++i)
      ours[i] = ours[i] && base.count(job.points[i].series) ? std::optional<double>(*ours[i] / base[job.points[i].series])
                                                           : std::nullopt;
  }
  const bool compare = ctx.scale == SweepScale::Paper;
  const auto paper = compare ? paper_values(job.spec) : decltype(paper_values(job.spec)){};
  const auto paper_day = compare && days ? paper_days(job.spec) : decltype(paper_days(job.spec)){};
  double sum = 0, worst = 0;
  int n = 0;
  std::string worst_at;
  fmt::print("{}: {} ({}{})\n", job.spec.name, metric_unit(job.spec.metric, ctx), ctx.mode,
             ctx.scale == SweepScale::Small ? ", small scale" : "");
  const bool one_series = job.spec.series.size() == 1;
  size_t series_w = one_series ? 0 : 28, x_w = 9;  // the columns line up also for a long series name or x
  for (const SweepPoint& pt : job.points)
    series_w = std::max(series_w, series_label(job.spec, pt.series).size()), x_w = std::max(x_w, pt.x.size());
  for (size_t i = 0; i < job.points.size(); ++i) {
    const SweepPoint& pt = job.points[i];
    std::string line = fmt::format("  {:<{}}{}{:>{}}  ours {:>9}", series_label(job.spec, pt.series), series_w,
                                   one_series ? "" : " ", pt.x, x_w,
                                   ours[i] ? fmt::format("{:.4g}", *ours[i]) : std::string("-"));
    const auto pv = paper.find({pt.series, pt.x});
    if (pv != paper.end()) {
      line += fmt::format("  paper {:>7.4g}", pv->second);
      // Normalised series are 1 at b = 1 by definition: those points are not compared.
      const bool anchor = job.spec.metric == "normalized_throughput" && pt.x == "1";
      if (ours[i] && pv->second != 0 && !anchor) {
        const double err = 100.0 * (*ours[i] - pv->second) / pv->second;
        line += fmt::format("  {:+6.1f}%", err);
        sum += std::abs(err);
        ++n;
        if (std::abs(err) >= worst) {
          worst = std::abs(err);
          worst_at = one_series ? pt.x : pt.series + ", " + pt.x;
        }
      }
    }
    if (days && ours_days[i]) {
      line += fmt::format("  | days for 300B tokens (Eq. 4): ours {:.1f}", *ours_days[i]);
      const auto pd = paper_day.find({pt.series, pt.x});
      if (pd != paper_day.end())
        line += fmt::format(", paper {:.0f}{} ({:+.1f}%)", pd->second, job.spec.paper == "table1" ? " (Eq. 4)" : "",
                            100.0 * (*ours_days[i] - pd->second) / pd->second);
    }
    fmt::print("{}\n", line);
  }
  if (n > 0)
    fmt::print("{}: mean absolute error {:.1f}% against the paper, largest {:.1f}% ({}), {} points\n", job.spec.name,
               sum / n, worst, worst_at, n);
}

// run_job's answer when a launch's size fits none of a spec's configurations still to run.
constexpr int kNoFit = 4;

int run_job(const Job& job, Context& ctx) {
  const SweepSpec& spec = job.spec;
  const size_t total = job.points.size();
  if (ctx.mode == "run" && spec.kind == SweepKind::Bubble) {
    if (ctx.report)
      fmt::print("{}: analytic (the paper's formula (p-1)/m), nothing to run; `ptdp reproduce {} --mode simulate` "
                 "writes its rows\n", spec.name, spec.name);
    return 0;
  }
  // Eq. (1)'s t_f(b), t_b(b) are one rank's: a launch of several ranks runs nothing of it (and
  // fails when nothing else of it runs either, as a launch of the wrong size does).
  if (ctx.launch_ranks > 1 && spec.kind == SweepKind::Eq1) {
    const std::string why = fmt::format("{}: measured on one rank, not by the {} ranks of this launch: run it without "
                                        "a launcher or as a one-rank job",
                                        spec.name, ctx.launch_ranks);
    if (ctx.report) fmt::print("{}, skipped\n", why);
    ctx.no_fit.push_back(why);
    return kNoFit;
  }
  std::vector<std::string> keys;
  std::vector<RunConfig> configs;
  for (const auto& pt : job.points) {
    configs.push_back(as_run(pt.cfg, ctx, spec.kind));
    keys.push_back(sweep_row_key(planned_row(configs.back(), ctx, spec.kind)));
  }
  const std::set<std::string> done = sweep_keys_in_csv(job.csv);
  if (ctx.world) ctx.world->barrier();  // every rank has read the file before rank 0 writes
  set_exit_message(fmt::format(
      "\nptdp: interrupted; every completed configuration is in {}: run the same command again to continue\n", job.csv));
  size_t todo = 0;
  std::set<int> sizes;  // the world sizes the configurations still to run need
  bool any_fits = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!ctx.force && done.count(keys[i])) continue;
    ++todo;
    sizes.insert(configs[i].ranks);
    any_fits = any_fits || (ctx.launch_ranks && configs[i].ranks == ctx.launch_ranks);
  }
  // A launched job (mpirun, srun) whose size matches none of them runs nothing of this spec; when
  // that holds for every spec of the launch, run_reproduce fails (it must not look done).
  if (ctx.launch_ranks && todo > 0 && !any_fits && spec.kind == SweepKind::Train) {
    const std::string why = fmt::format("{}: no configuration still to run fits the {} ranks of this launch; they need "
                                        "{} ranks",
                                        spec.name, ctx.launch_ranks, fmt::join(sizes, ", "));
    if (ctx.report) fmt::print("{}, skipped\n", why);
    ctx.no_fit.push_back(why);
    return kNoFit;
  }
  if (ctx.report)
    fmt::print("{}: {}\n{}: {} configurations ({} to {}, {} already in {}), mode {}, scale {}{}\n", spec.name, spec.title,
               spec.name, total, todo, ctx.mode == "simulate" ? "simulate" : "run", total - todo, job.csv, ctx.mode,
               ctx.scale == SweepScale::Small ? "small" : "paper",
               ctx.mode == "simulate" ? ", hardware " + ctx.hw->name : "");
  const Clock::time_point sweep_start = Clock::now();
  size_t computed = 0, no_row = 0;
  std::map<int, ResultRow> eq1_measured;
  for (size_t i = 0; i < total; ++i) {
    const SweepPoint& pt = job.points[i];
    const RunConfig& c = configs[i];
    const std::string series = series_label(spec, pt.series);
    const std::string head = fmt::format("[{} {}/{}] {}x {}: {}", spec.name, i + 1, total,
                                         series.empty() ? "" : series + ", ", pt.x, layout(c));
    if (!ctx.force && done.count(keys[i])) {
      if (ctx.report) fmt::print("{}: already in {}, skipped\n", head, job.csv);
      continue;
    }
    if (ctx.launch_ranks && spec.kind == SweepKind::Train && c.ranks != ctx.launch_ranks) {
      if (ctx.report) fmt::print("{}: needs {} ranks, the MPI world has {}, skipped\n", head, c.ranks, ctx.launch_ranks);
      continue;
    }
    if (ctx.report) {
      fmt::print("{}", head);
      std::fflush(stdout);
    }
    const Clock::time_point t0 = Clock::now();
    Outcome o;
    if (spec.kind == SweepKind::Bubble) o = bubble_row(c, ctx);
    else if (spec.kind == SweepKind::Eq1) o = ctx.mode == "simulate" ? simulate_eq1(c, ctx) : run_eq1(c, eq1_measured);
    else if (ctx.mode == "simulate") o = simulate_train(c, ctx);
    else o = {run_training(c, ctx.world, false), ""};
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    ++computed;
    if (o.row && ctx.report) write_row(job.csv, *o.row, ctx.force);
    if (!o.row) ++no_row;
    const double elapsed = std::chrono::duration<double>(Clock::now() - sweep_start).count();
    const double eta = elapsed / computed * double(todo - computed);
    if (!ctx.report) continue;
    std::string result;
    if (o.row) {
      const std::string col = metric_column(spec.metric);
      const std::string v = o.row->get(col);
      result = v.empty() ? std::string("-") : fmt::format("{:.4g} {}", std::stod(v) * metric_scale(spec.metric),
                                                          metric_unit(spec.metric, ctx));
      if (ctx.mode == "run")
        result += fmt::format(", {:.4g} ms/iteration, loss {:.4f}", std::stod(o.row->get("iter_time_ms")),
                              std::stod(o.row->get("loss")));
    } else {
      result = "no row: " + o.note;
    }
    fmt::print(" -> {} | {} | elapsed {}, ETA {}\n", result, duration(took),
               duration(std::chrono::duration<double>(Clock::now() - ctx.start).count()), duration(eta));
    std::fflush(stdout);
  }
  if (ctx.report) {
    fmt::print("{}: {} of {} configurations computed{}, rows in {}\n", spec.name, computed, total,
               no_row ? fmt::format(" ({} without a row)", no_row) : std::string(), job.csv);
    print_summary(job, ctx, keys);
    std::fflush(stdout);
  }
  return 0;
}

// The expanded configurations of --dry-run, as CSV.
void print_expanded(const std::vector<Job>& jobs) {
  fmt::print("experiment,kind,series,x,model,layers,hidden,heads,seq_length,vocab_size,gpus,tp,pp,dp,vpp,micro_batch,"
             "global_batch,num_microbatches,schedule,recompute,scatter_gather,overlap_grad_reduce,precision,iters,"
             "warmup,zero,sequence_parallel,stack\n");
  auto q = [](const std::string& s) { return s.find(',') == std::string::npos ? s : "\"" + s + "\""; };
  for (const auto& j : jobs)
    for (const auto& pt : j.points) {
      const RunConfig& c = pt.cfg;
      const ParallelConfig& p = c.par;
      fmt::print("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", j.spec.name,
                 sweep_kind_name(j.spec.kind), q(pt.series), q(pt.x), c.model.name, c.model.layers, c.model.hidden,
                 c.model.heads, c.model.seq_length, c.model.vocab_size, c.ranks, p.tp, p.pp, p.dp, p.vpp,
                 p.micro_batch, p.global_batch, p.num_microbatches(), p.schedule, enum_name(p.recompute),
                 p.scatter_gather ? 1 : 0, c.overlap_grad_reduce ? 1 : 0, c.precision, c.iters, c.warmup, p.zero,
                 p.sequence_parallel ? 1 : 0, c.stack);
    }
}

// Refuses, before anything is written, a --mode run at paper scale that needs a launcher it was not
// given, and any configuration that cannot run here (one line naming its spec, series and x).
void check_runnable(const std::vector<Job>& jobs, Context& ctx, const ReproduceFlags& f, bool launched) {
  int lo = 1 << 30, hi = 0;  // ranks the selected training configurations need (Eq. (1): one rank)
  for (const auto& j : jobs)
    for (const auto& pt : j.points) {
      if (j.spec.kind != SweepKind::Train) continue;
      lo = std::min(lo, pt.cfg.ranks);
      hi = std::max(hi, pt.cfg.ranks);
    }
  // One-GPU figures (Figure 7) run here on the CUDA backend; the others need a launcher.
  if (f.mode == "run" && ctx.scale == SweepScale::Paper && !launched && hi > 1) {
    usage_error("--mode run --scale paper: {} needs {} GPU ranks (the paper's layouts, one GPU each), the CUDA "
                "backend and NCCL; launch it on a cluster under mpirun or srun (scripts/launch/README.md), or use "
                "--scale small (CPU ranks here) or --mode simulate",
                f.name, lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi));
  }
  // Every configuration must be runnable before anything is written.
  for (const auto& j : jobs)
    for (const auto& pt : j.points) {
      try {
        ctx.hw = j.hw;
        const RunConfig c = as_run(pt.cfg, ctx, j.spec.kind);
        if (f.mode == "run" && j.spec.kind == SweepKind::Train) {
          require_supported(c);
          require_backend_here(c, true);  // ranks run as threads here
        }
        if (f.mode == "run" && j.spec.kind == SweepKind::Eq1) {  // one rank: a GPU here at paper scale
          require_supported(eq1_measurement(c));
          require_backend_here(eq1_measurement(c), true);
        }
      } catch (const UsageError& e) {
        usage_error("{}: series '{}', x '{}': {}", j.spec.path, pt.series, pt.x, e.what());
      }
    }
}

int run_reproduce(const CLI::App& app, ReproduceFlags& f) {
  if (f.mode != "simulate" && f.mode != "run") usage_error("--mode '{}' must be simulate or run", f.mode);
  Context ctx;
  ctx.mode = f.mode;
  ctx.scale = parse_sweep_scale(f.scale);
  ctx.force = f.force;
  if (f.mode == "run" && app.count("--hardware"))
    usage_error("--hardware {} is for --mode simulate (--mode run measures this machine)", f.hardware);

  const std::string llama_data_csv = (fs::path(f.out) / "llama-data.csv").string();
  // llama-data: LLaMA's data mixture through Megatron's blending (reproduce_llama_data.h), computed.
  if (f.name == "llama-data") {
    if (f.mode != "simulate")
      usage_error("--mode {}: llama-data is computed from the paper's sizes; use --mode simulate", f.mode);
    std::error_code ec;
    if (!f.dry_run && !fs::exists(f.out, ec)) fs::create_directories(f.out, ec);
    return reproduce_llama_data("llama-data", llama_data_csv, f.dry_run);
  }
  // llama: the planner at LLaMA's scale (reproduce_llama.h), simulated only.
  const bool llama = f.name == "llama" || (f.name == "all" && f.mode == "simulate" && !f.dry_run);
  const std::string llama_csv = (fs::path(f.out) / "llama.csv").string();
  if (f.name == "llama") {
    if (f.mode != "simulate") usage_error("--mode {}: llama is planned on 2,048 GPUs; use --mode simulate", f.mode);
    if (ctx.scale != SweepScale::Paper) usage_error("--scale {}: llama has the paper scale only", f.scale);
    const sim::HardwareProfile hw = sim::load_profile(f.hardware);
    std::error_code ec;
    if (!f.dry_run && !fs::exists(f.out, ec)) fs::create_directories(f.out, ec);
    return reproduce_llama("llama", llama_csv, hw, f.dry_run);
  }

  std::vector<Job> jobs;
  for (const auto& name : f.name == "all" ? sweep_names() : std::vector<std::string>{f.name}) {
    Job j;
    j.spec = load_sweep_spec(name);
    j.points = expand_sweep(j.spec, ctx.scale);
    j.csv = (fs::path(f.out) / (j.spec.name + ".csv")).string();
    jobs.push_back(std::move(j));
  }

  if (f.plan_jobs) {
    if (f.mode != "run") usage_error("--plan-jobs plans the launches of --mode run (not --mode {})", f.mode);
    if (f.gpus_per_node < 1 || f.gpus_per_node > 1024)
      usage_error("--gpus-per-node {} must be in [1, 1024]", f.gpus_per_node);
    if (ctx.scale == SweepScale::Small && app.count("--gpus-per-node"))
      usage_error("--gpus-per-node {}: --scale small runs CPU ranks, no GPUs (it is for --scale paper)", f.gpus_per_node);
    std::vector<PlannedSweep> sweeps;
    for (const auto& j : jobs) sweeps.push_back({&j.spec, &j.points});
    print_launch_plan(sweeps, {f.name, f.out, ctx.scale, f.gpus_per_node});
    return 0;
  }
  if (f.dry_run) {  // the expanded configurations, as CSV
    print_expanded(jobs);
    return 0;
  }

  if (f.mode == "simulate")
    for (auto& j : jobs)
      j.hw = sim::load_profile(app.count("--hardware") || j.spec.hardware.empty() ? f.hardware : j.spec.hardware);

#ifdef PTDP_HAVE_MPI
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<Communicator> world;
#endif
  const bool launched = [] {
#ifdef PTDP_HAVE_MPI
    return MpiSession::launched_by_mpi();
#else
    return false;
#endif
  }();
  check_runnable(jobs, ctx, f, launched);
  if (f.mode == "run" && launched) {
#ifdef PTDP_HAVE_MPI
    mpi = std::make_unique<MpiSession>(nullptr, nullptr);
    world = mpi->world();
    // A one-process launch at --scale small runs every configuration here, ranks as threads (as
    // without a launcher); at paper scale (a GPU a rank) it is the launch for one-rank layouts.
    if (world->size() > 1 || ctx.scale == SweepScale::Paper) ctx.launch_ranks = world->size();
    if (world->size() > 1) {
      ctx.world = world.get();
      ctx.report = world->rank() == 0;
    }
#endif
  }

  std::error_code ec;
  if (!fs::exists(f.out, ec)) {
    fs::create_directories(f.out, ec);
    if (ec) usage_error("--out {}: cannot create the directory: {}", f.out, ec.message());
  }
  for (const auto& j : jobs) check_result_csv(j.csv, "--out");
  for (const auto& j : jobs) sweep_keys_in_csv(j.csv);  // a malformed file is refused before any work

  install_interrupt_handlers(OnInterrupt::ExitAtOnce);
  bool ran = false;  // a spec had a configuration of this size to run, or nothing left to run
  for (const auto& j : jobs) {
    ctx.hw = j.hw;
    ran = run_job(j, ctx) != kNoFit || ran;
  }
  if (!ran) {
    if (ctx.report)
      fmt::print(stderr,
                 "ptdp: error: {} (launch one job per size, e.g. srun -n N or mpirun -np N; `ptdp reproduce {} --mode run "
                 "--plan-jobs` lists them)\n",
                 fmt::join(ctx.no_fit, "; "), f.name);
    return 2;
  }
  if (llama && ctx.report) {
    reproduce_llama("llama", llama_csv, sim::load_profile(f.hardware), false);
    reproduce_llama_data("llama-data", llama_data_csv, false);
  }
  if (ctx.report && jobs.size() > 1)
    fmt::print("reproduce: {} artefacts in {} ({})\n", jobs.size(), f.out,
               duration(std::chrono::duration<double>(Clock::now() - ctx.start).count()));
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> add_reproduce_command(CLI::App& app) {
  auto f = std::make_shared<ReproduceFlags>();
  CLI::App* sub = app.add_subcommand(
      "reproduce", "run the sweep of a paper figure or table (experiments/specs/NAME.toml), one row per configuration "
                   "in OUT/NAME.csv; configurations already there are skipped");
  sub->add_option("name", f->name, fmt::format("{}, all, or a spec FILE.toml", fmt::join(artefact_names(), ", ")))
      ->required();
  sub->add_option("--mode", f->mode, "simulate (performance model) | run (the real training core)")
      ->capture_default_str();
  sub->add_option("--scale", f->scale,
                  "paper (the paper's models and GPU counts) | small (the same layouts with small models on CPU ranks)")
      ->capture_default_str();
  sub->add_option("--out", f->out, "directory of the result CSVs (created if missing)")->capture_default_str();
  sub->add_option("--hardware", f->hardware, "hardware profile for --mode simulate (a name in hardware/ or a .toml)")
      ->capture_default_str();
  sub->add_flag("--force", f->force, "recompute configurations already in the CSV (their rows are replaced)");
  sub->add_flag("--dry-run", f->dry_run, "print the expanded configurations as CSV and exit");
  sub->add_flag("--plan-jobs", f->plan_jobs,
                "with --mode run: print the cluster launches the sweep needs (one per world size, its nodes and its "
                "sbatch line) and exit");
  sub->add_option("--gpus-per-node", f->gpus_per_node, "GPUs (ranks) per node, for --plan-jobs")->capture_default_str();
  return {sub, [sub, f]() { return run_reproduce(*sub, *f); }};
}

}  // namespace ptdp
