// `ptdp accept --hardware PROFILE [--out FILE]`: a short hardware acceptance run. It measures
// the GEMM rate, the memory bandwidth (STREAM triad), the all-reduce bus bandwidth and the p2p
// bandwidth inside a node (the local communicator with the node's ranks), and trains `tiny` for
// 20 iterations against golden losses; each figure is compared with a threshold of the
// acceptance profile (hardware/NAME-accept.toml). A profile of kind = "gpu" runs the GPU
// checks of accept_gpu.h instead, and trains on the CUDA backend. Prints a PASS/FAIL/SKIP
// table, writes a JSON and a CSV report (atomically); exit code 0 when every check that ran
// passes, 1 otherwise, 2 on bad input. This file holds the command and the order of its steps;
// the profile, the checks (accept_cpu, accept_gpu, accept_fleet, accept_health, accept_burnin,
// accept_golden) and the reports (accept_report) have files of their own.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/comm/agreement.h"
#include "core/common/error.h"
#include "core/results/distinct_outputs.h"
#include "core/results/output_files.h"
#include "experiments/accept_burnin.h"
#include "experiments/accept_cpu.h"
#include "experiments/accept_fleet.h"
#include "experiments/accept_golden.h"
#include "experiments/accept_gpu.h"
#include "experiments/accept_health.h"
#include "experiments/accept_memory.h"
#include "experiments/accept_profile.h"
#include "experiments/accept_report.h"

namespace ptdp {

namespace {

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

  bool named(const std::string& check) const { return std::find(checks.begin(), checks.end(), check) != checks.end(); }
};

// One run: what the flags and the profile ask for, settled before anything is measured.
struct AcceptRun {
  const AcceptFlags& f;
  Communicator* world;  // the job's processes when launched over several (a fleet, accept_fleet.h), else null
  AcceptProfile p;
  bool gpu = false, benchmarks = false;
  std::pair<std::string, std::string> out;  // the JSON and CSV reports, or empty
  std::optional<GoldenRun> golden;
  std::vector<GpuHealth> health;
  std::string health_why;
  int threads = 0, reps = 0;
  int fleet_gpu = -1;  // a fleet of one process per GPU: this process's GPU
  Provenance pv;  // taken when the run starts measuring (print_header)

  bool wanted(const std::string& c) const {
    if (f.level == 1) return c == "health";
    if (c == "internode" && !world) return false;
    if (f.checks.empty()) return (c != "health" || gpu) && (c != "burnin" || f.level == 3);
    return f.named(c);
  }
};

// The flags' own rules (UsageError, exit code 2).
void check_flags(const AcceptFlags& f, const Communicator* world) {
  for (const auto& c : f.checks)
    if (std::find(all_checks().begin(), all_checks().end(), c) == all_checks().end())
      usage_error("--checks: unknown check '{}' (known: health, gemm, memory, allreduce, p2p, train, internode, "
                  "burnin)",
                  c);
  if (!world && f.named("internode"))
    usage_error("--checks internode: measures between nodes; launch ptdp accept over them (srun, or mpirun with "
                "several processes), one process per node");
  if (f.threads < 0) usage_error("--threads {} must be positive (0: every core)", f.threads);
  if (f.threads > max_threads())
    usage_error("--threads {} must be at most {} ({} x the {} hardware threads here; more only wait for a core)",
                f.threads, max_threads(), kThreadsPerHardwareThread, max_threads() / kThreadsPerHardwareThread);
  if (f.level < 0 || f.level > 3)
    usage_error("--level {}: 1 (the GPUs' health, seconds), 2 (health, then every check) or 3 (level 2, then the "
                "burn-in)",
                f.level);
  const bool burnin_asked = f.level == 3 || f.named("burnin");
  if (f.burnin_seconds != 0 && !burnin_asked)
    usage_error("--burn-in-seconds: only with --level 3 or --checks burnin (the burn-in it times)");
  if (f.burnin_seconds < 0 || !std::isfinite(f.burnin_seconds))
    usage_error("--burn-in-seconds {} must be positive", f.burnin_seconds);
  if (f.level != 0 && !f.checks.empty()) usage_error("--level and --checks: give one of them, not both");
}

// The flags, the profile, the output files, the golden file and the machine: every refusal
// before anything is measured. The health pre-flight reads NVML here, before anything starts a
// CUDA context (this process would count).
void settle(AcceptRun& r) {
  const AcceptFlags& f = r.f;
  check_flags(f, r.world);
  r.p = load_accept_profile(f.hardware);
  r.gpu = r.p.kind == "gpu";
  if ((f.level == 1 || f.named("health")) && !r.gpu)
    usage_error("{}: the health check reads GPUs through NVML; profile {} is a CPU profile",
                f.level == 1 ? "--level 1" : "--checks health", r.p.name);
  if (!f.out.empty()) r.out = report_paths(f.out);
  if (!f.write_golden.empty()) check_output_file(f.write_golden, "--write-golden");
  check_distinct_outputs(
      {{"--out", r.out.first}, {"--out's CSV report", r.out.second}, {"--write-golden", f.write_golden}});
  if ((r.wanted("train") || r.wanted("burnin")) && f.write_golden.empty())
    r.golden = read_golden(golden_source(r.p).path);  // bad file: exit 2 first
  if (r.wanted("health")) r.health = read_gpu_health(&r.health_why);
  r.benchmarks = r.wanted("gemm") || r.wanted("memory") || r.wanted("allreduce") || r.wanted("p2p") ||
                 r.wanted("train") || r.wanted("burnin") || r.wanted("internode") || !f.write_golden.empty();
  if (r.gpu && r.benchmarks)
    require_gpus(f.hardware, r.p, r.wanted("allreduce") || r.wanted("p2p"));  // no GPU: exit 2, nothing written
  else if (r.gpu && r.health.empty())  // the health alone, and no driver to ask: nothing to measure
    usage_error("--hardware {}: a GPU acceptance profile ({}), and no GPU here to check the health of ({})",
                f.hardware, r.p.device, r.health_why);
  // What the checks hold against what is free, before anything is allocated. A GPU fleet's
  // processes each take their GPU later (place_in_fleet): asking every GPU here would start a
  // CUDA context on each, from each process.
  const auto wanted = [&](const std::string& c) { return r.wanted(c); };
  if (!r.gpu && r.benchmarks) check_memory_need(f.hardware, largest_memory_need(r.p, wanted), host_memory_available());
  if (r.gpu && r.benchmarks && !r.world)
    check_memory_need(f.hardware, largest_memory_need(r.p, wanted), gpu_memory_available());
}

// A GPU fleet launched one process per GPU (several processes on a node, srun
// --ntasks-per-node=8): each process checks its own GPU, and each GPU is a row of the report.
void place_in_fleet(AcceptRun& r) {
  if (!r.world || !r.gpu || !r.benchmarks) return;
  const std::string node = fleet_node_name();
  const FleetPlace place = fleet_place(*r.world, node);
  const int visible = visible_gpus(nullptr);
  if (visible > 1 && place.per_node > visible)
    usage_error("--hardware {}: {} processes of this job run on node {}, which has {} GPUs: launch one process per "
                "node or at most one per GPU",
                r.f.hardware, place.per_node, node, visible);
  if (place.per_node > 1) {
    r.fleet_gpu = visible == 1 ? 0 : place.local;  // the launcher gave each process one GPU, or it takes its own
    check_one_gpu(r.fleet_gpu);
  }
}

// The provenance of the reports and the run's first lines.
void print_header(AcceptRun& r) {
  const AcceptProfile& p = r.p;
  r.pv = Provenance{};
  Provenance& pv = r.pv;
  if (r.gpu) pv.device = r.benchmarks ? gpu_description() : health_description(r.health);
  if (r.fleet_gpu >= 0) pv.device = fmt::format("GPU {} of {}", r.fleet_gpu, pv.device);
  if (r.gpu && r.benchmarks) pv.software = gpu_software();
  const char* quick = r.f.quick ? ", --quick" : "";
  if (r.gpu && !r.benchmarks)
    fmt::print("ptdp accept: profile {} ({}), health of {} on {}\n", p.name, p.path, pv.device, pv.host);
  else if (r.gpu)
    fmt::print("ptdp accept: profile {} ({}), {} on {}, {} repetitions per measurement (best counts){}\n", p.name,
               p.path, gpu_summary(p), pv.host, r.reps, quick);
  else
    fmt::print("ptdp accept: profile {} ({}), {} on {}, {} thread(s), {} repetitions per measurement (best counts){}\n",
               p.name, p.path, pv.device, pv.host, r.threads, r.reps, quick);
  if (!p.cpu_model.empty() && pv.cpu != p.cpu_model)
    fmt::print(stderr,
               "ptdp: warning: profile {} ({}) was measured on a '{}' CPU (its cpu_model); this machine's is '{}': "
               "its thresholds may not fit this CPU\n",
               p.name, p.path, p.cpu_model, pv.cpu);
  if (r.world)
    fmt::print("fleet: {} processes ({} comm); each runs the node checks, then the inter-node ones; rank 0 "
               "gathers the verdicts\n",
               r.world->size(), r.world->backend());
  std::fflush(stdout);
}

// The health rows, printed at once: they explain a FAIL of the benchmarks that follow.
std::vector<Check> health_rows(const AcceptRun& r) {
  std::vector<Check> checks = health_checks(r.health, r.health_why);
  checks.push_back(host_load_check(read_host_load(), r.p.max_load_per_cpu));
  for (const Check& c : checks) fmt::print("health {} {}: {}\n", c.metric, c.status(), c.detail);
  std::fflush(stdout);
  return checks;
}

// Where the golden run trains: the first checked GPU, or the golden file's CPU threads.
std::string train_place(const AcceptRun& r, const std::string& gpu_prefix, int omp_threads) {
  return r.gpu ? fmt::format("{}GPU {}", gpu_prefix, checked_gpus().at(0)) : fmt::format("{} thread(s)", omp_threads);
}

// --write-golden: tiny with the fixed flags of docs/ACCEPTANCE.md, 20 iterations, into the file.
void record_golden(AcceptRun& r) {
  GoldenRun g;
  g.losses = train_losses(g, 20, r.gpu);
  write_golden(r.f.write_golden, g);
  fmt::print("wrote {} ({} iterations of {}, b={} B={} seed {} lr {} on {})\n", r.f.write_golden, g.losses.size(),
             g.model, g.micro_batch, g.global_batch, g.seed, g.lr, train_place(r, "the CUDA backend, ", g.omp_threads));
  if (r.wanted("train") || r.wanted("burnin")) r.golden = read_golden(golden_source(r.p).path);
}

Check train(const AcceptRun& r) {
  const GoldenRun& g = *r.golden;
  const std::vector<double> got = train_losses(g, int(g.losses.size()), r.gpu);
  return train_check(r.p, g, golden_source(r.p), got, train_place(r, "f32 on the CUDA backend, ", g.omp_threads));
}

// --level 3: rounds of the GEMM load, each followed by the golden run (accept_burnin.h).
std::vector<Check> burnin(const AcceptRun& r) {
  const AcceptProfile& p = r.p;
  const GoldenRun& g = *r.golden;
  const GoldenSource source = golden_source(p);
  const double seconds = r.f.burnin_seconds > 0 ? r.f.burnin_seconds : p.burnin_seconds;
  const std::string unit = r.gpu ? "TFLOP/s" : "GFLOP/s";
  fmt::print("burn-in: rounds of {:.0f} s of the GEMM{}, each then {} {} iterations against {}, for {:.0f} s\n",
             std::min(p.burnin_round_seconds, seconds), r.gpu ? " on every GPU at once" : "", g.model,
             g.losses.size(), source.name, seconds);
  std::fflush(stdout);
  auto load = [&](double load_seconds, BurnInRound& round) {
    if (!r.gpu) {
      round.gemm_rate = cpu_gemm_load(p, r.threads, load_seconds);
      return;
    }
    std::string why;
    const GemmLoad l = gemm_load(p, load_seconds, [&] { round.sensors = read_gpu_health(&why); });
    round.gemm_rate = l.tflops;
    round.gemm_checked = l.checked;
    round.gemm_wrong = l.wrong;
  };
  const std::vector<BurnInRound> rounds = run_burnin(seconds, p.burnin_round_seconds, unit, load,
                                                     [&] { return train_losses(g, int(g.losses.size()), r.gpu); });
  return burnin_checks(rounds, unit, g.losses, source.name, p.burnin_min_sustained, source.tolerance);
}

// The checks between nodes; a GPU fleet measures between its GPUs over NCCL, each process from
// its first checked GPU.
std::vector<Check> internode(const AcceptRun& r) {
  const std::string node = fleet_node_name();
  return r.gpu ? gpu_internode_checks(*r.world, node, r.p, r.reps, checked_gpus().at(0))
               : internode_checks(*r.world, node, r.p, r.reps);
}

// Every check the run asks for, in the report's order.
std::vector<Check> run_checks(AcceptRun& r) {
  std::vector<Check> checks;
  auto add = [&](const std::vector<Check>& more) { checks.insert(checks.end(), more.begin(), more.end()); };
  if (r.wanted("health")) add(health_rows(r));
  if (r.gpu && r.benchmarks) add(gpu_checks(r.p, [&](const std::string& c) { return r.wanted(c); }, r.reps));
  if (!r.gpu) add(cpu_checks(r.p, [&](const std::string& c) { return r.wanted(c); }, r.reps, r.threads));
  if (!r.f.write_golden.empty()) record_golden(r);
  if (r.wanted("train")) checks.push_back(train(r));
  if (r.wanted("burnin")) add(burnin(r));
  if (r.wanted("internode")) add(internode(r));
  return checks;
}

int accept(const AcceptFlags& f, Communicator* world) {
  // In a fleet every process settles its own run (the same flags, its own node's GPUs) and all
  // agree: a bad flag ends every process with one line and exit code 2, not MPI_Abort's banner.
  AcceptRun r{f, world};
  if (world)
    agree(*world, [&] { settle(r); });
  else
    settle(r);
  r.threads = f.threads > 0 ? f.threads : std::max(1, int(std::thread::hardware_concurrency()));
  r.reps = f.quick ? 3 : 10;
  // In a fleet, rank 0 speaks for every process: the others print nothing and write nothing.
  std::optional<ScopedQuietStdout> quiet;
  if (world && world->rank() != 0) quiet.emplace();
  place_in_fleet(r);
  print_header(r);
  const std::vector<Check> checks = run_checks(r);
  if (world) return fleet_report(*world, r.p, checks, r.pv, r.out, r.fleet_gpu);
  return node_report(r.p, checks, r.pv, r.out, {r.threads, f.quick});
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
  cmd->add_option("--threads", f->threads,
                  "CPU threads for the GEMM and memory checks (default: every core; at most 4 x the hardware threads)");
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
