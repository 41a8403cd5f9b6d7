// `ptdp plan`: searches the parallel layouts of a model on N devices of a hardware profile and
// prints the fastest that fit in memory, beside the paper's heuristic choice.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/common/error.h"
#include "core/config/results_csv.h"
#include "core/results/provenance.h"
#include "core/sim/hardware.h"
#include "core/sim/planner.h"
#include "experiments/cli_flags.h"
#include "experiments/result_row.h"

namespace ptdp {

namespace {

struct PlanFlags {
  RunFlags run;
  std::string hardware, precision, csv;
  int gpus = 0, global_batch = 0, top = 10, max_vpp = 8, max_cp = 8;
  std::vector<int> micro_batches = {1, 2, 4, 8, 16};
  std::vector<int> zero_modes = {0};
  bool overlap_grad_reduce = false;
  std::string stack = "megatron-2021";
};

// The flags that give an uneven placement, for `ptdp train` or Megatron-core's command line.
std::string placement_flags(const ParallelConfig& p) {
  std::string out;
  if (p.first_stage_layers > 0) out += fmt::format(" --decoder-first-pipeline-num-layers {}", p.first_stage_layers);
  if (p.last_stage_layers > 0) out += fmt::format(" --decoder-last-pipeline-num-layers {}", p.last_stage_layers);
  if (p.embedding_in_split) out += " --account-for-embedding-in-pipeline-split";
  if (p.loss_in_split) out += " --account-for-loss-in-pipeline-split";
  return out.empty() ? out : " (" + out.substr(1) + ")";
}

// `cp`: the search has context parallelism (a c column, and why under each layout with c > 1).
void print_entry(const char* rank, const sim::PlanEntry& e, bool cp) {
  const ParallelConfig& p = e.cfg.par;
  const sim::SimResult& r = e.result;
  std::string stages = describe_stages(p.layer_split(e.cfg.model.layers));
  if (!stages.empty()) stages += placement_flags(p);
  const std::string c = cp ? fmt::format(" {:>2}", p.cp) : std::string();
  fmt::print("{:>5} {:>3}{} {:>4} {:>5} {:>2} {:>3} {:>5}  {:<11} {:<9} {:>4} {:>10.4g} {:>8.1f} {:>6.1f} {:>7.3f} {:>7.1f}{}\n",
             rank, p.tp, c, p.pp, p.dp, p.vpp, p.micro_batch, p.num_microbatches(), p.schedule,
             enum_name(p.recompute), p.zero, r.iter_time_s, r.tflops_per_gpu, r.pct_peak, r.bubble_fraction,
             r.memory.peak / 1e9, stages.empty() ? "" : "  layers per stage " + stages);
  if (!e.why.empty()) fmt::print("      why c = {}: {}\n", p.cp, e.why);
}

int run_plan(const CLI::App& app, PlanFlags& f) {
  const sim::HardwareProfile hw = sim::load_profile(f.hardware);
  if (f.max_vpp < 1) usage_error("--max-vpp {} must be positive", f.max_vpp);
  f.run.run.backend = hw.kind == "cpu" ? BackendKind::Cpu : BackendKind::Cuda;
  f.run.run.precision = f.precision.empty() ? hw.default_precision : parse_enum<Precision>(f.precision, "--precision");
  const RunConfig base = resolve_run_config(app, f.run);  // the model (and the precision rule)
  if (!f.csv.empty()) check_result_csv(f.csv);
  // after the flags are checked: a usage error stays the one line on stderr
  if (const std::string w = sim::other_cpu_warning(hw, cpu_name()); !w.empty())
    fmt::print(stderr, "ptdp: warning: {}\n", w);

  sim::PlanRequest req;
  req.model = base.model;
  req.gpus = f.gpus;
  req.global_batch = f.global_batch;
  req.precision = base.precision;
  req.micro_batches = f.micro_batches;
  req.max_vpp = f.max_vpp;
  req.max_cp = f.max_cp;
  req.zero_modes = f.zero_modes;
  req.top = f.top;
  req.stack = parse_enum<StackKind>(f.stack, "--stack");
  // A long search (a large --top over many devices) says how far it is, every 2 s, on stderr.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  req.progress = [&](int64_t simulated, int64_t at_most) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(2)) return;
    last = now;
    std::fprintf(stderr, "ptdp plan: %.0f s: simulated %lld of at most %lld layouts that fit\n",
                 std::chrono::duration<double>(now - start).count(), static_cast<long long>(simulated),
                 static_cast<long long>(at_most));
  };
  sim::SimOptions opt;
  opt.dp_overlap = f.overlap_grad_reduce;
  const sim::PlanResult res = sim::plan(req, hw, opt);

  const ModelConfig& m = req.model;
  fmt::print("ptdp plan: model {} (l={} h={} a={} s={} V={}), {} x {} ({}), global batch {}, {}\n", m.name, m.layers,
             m.hidden, m.heads, m.seq_length, m.vocab_size, f.gpus, hw.device, hw.name, f.global_batch, base.precision);
  const bool cp = sim::software_stack(req.stack).context_parallel;
  fmt::print("searched {} layouts (t, {}p, d, v, b, schedule, recompute, zero): {} fit in memory, {} simulated (the "
             "others cannot enter the top {})\n",
             res.layouts, cp ? "c, " : "", res.fit, res.simulated, f.top);
  if (res.best.empty() && res.fit == 0) {
    std::fprintf(stderr, "ptdp: out of memory: no layout of model %s fits on %d x %s\n", m.name.c_str(), f.gpus,
                 hw.device.c_str());
    return 1;
  }
  PTDP_CHECK(!res.best.empty(), "{} layouts fit in memory and none was simulated", res.fit);
  fmt::print("{:>5} {:>3}{} {:>4} {:>5} {:>2} {:>3} {:>5}  {:<11} {:<9} {:>4} {:>10} {:>8} {:>6} {:>7} {:>7}\n", "rank", "t",
             cp ? "  c" : "", "p", "d", "v", "b", "m", "schedule", "recompute", "zero", "iter (s)", "TFLOP/s", "%peak",
             "bubble", "mem GB");
  for (size_t i = 0; i < res.best.size(); ++i) print_entry(std::to_string(i + 1).c_str(), res.best[i], cp);
  if (res.heuristic) {
    const double ratio = res.heuristic->result.tflops_per_gpu / res.best.front().result.tflops_per_gpu;
    print_entry("paper", *res.heuristic, cp);
    fmt::print("paper heuristic: {}; {:.1f}% of the best predicted throughput\n", res.heuristic_note, 100 * ratio);
  } else {
    fmt::print("paper heuristic: {}\n", res.heuristic_note);
  }
  if (!f.csv.empty()) {
    std::vector<ResultRow> rows;
    for (const auto& e : res.best) rows.push_back(make_simulated_row(e.cfg, hw, e.result));
    append_result_rows(f.csv, rows);
    fmt::print("appended {} rows to {}\n", rows.size(), f.csv);
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* sub = app.add_subcommand(
      "plan", "search t, c, p, d, v, b, schedule and recompute on a hardware profile; print the fastest that fit");
  add_model_flags(*sub, f->run);
  sub->add_option("--gpus", f->gpus, "number of devices")->required();
  sub->add_option("--global-batch", f->global_batch, "global batch size B")->required();
  sub->add_option("--hardware", f->hardware, "hardware profile: a name in hardware/ or a .toml file")->required();
  sub->add_option("--precision", f->precision, "f16 | bf16 | f32 (default: the profile's)");
  sub->add_option("--top", f->top, "how many configurations to print")->capture_default_str();
  sub->add_option("--micro-batches", f->micro_batches, "micro-batch sizes to try")->delimiter(',')->capture_default_str();
  sub->add_option("--max-vpp", f->max_vpp, "largest interleaving degree v to try")->capture_default_str();
  sub->add_option("--max-cp", f->max_cp,
                  "largest context-parallel size c to try (powers of two; under a --stack with context parallelism)")
      ->capture_default_str();
  sub->add_option("--zero-modes", f->zero_modes,
                  "sharded data parallelism to try: 0 (none), 1 (distributed optimizer), 2 (ZeRO-2: gradients sharded "
                  "too; --stack mcore), 3 (ZeRO-3, t = p = 1)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_flag("--overlap-grad-reduce", f->overlap_grad_reduce,
                "overlap the data-parallel all-reduce with the backward pass");
  sub->add_option("--csv", f->csv, "append the best configurations as result rows (mode=simulate)");
  sub->add_option("--stack", f->stack,
                  "software modelled: megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp (megatron-2022, "
                  "mcore and ptdp run sequence parallelism wherever t > 1); docs/SIMULATOR.md")
      ->capture_default_str();
  return {sub, [sub, f]() { return run_plan(*sub, *f); }};
}

}  // namespace ptdp
