// `ptdp simulate`: predicts one iteration of a configuration on a hardware profile (core/sim)
// and writes the same result row as `ptdp train`, with mode=simulate.
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/common/error.h"
#include "core/config/config_fields.h"
#include "core/accounting/flops.h"
#include "core/config/results_csv.h"
#include "core/results/provenance.h"
#include "core/sim/cost_model.h"
#include "core/sim/hardware.h"
#include "core/sim/kernels.h"
#include "core/sim/stack.h"
#include "core/sim/simulator.h"
#include "experiments/cli_flags.h"
#include "experiments/result_row.h"

namespace ptdp {

namespace {

// The fields of the run and optimizer tables that simulate takes (the others are train's alone).
constexpr const char* kSimulatedRunFlags[] = {"--experiment",
                                              "--attention-backend",
                                              "--ranks",
                                              "--precision",
                                              "--overlap-grad-reduce",
                                              "--csv",
                                              "--grad-reduce-in-bf16",
                                              "--overlap-param-gather-with-optimizer-step",
                                              "--use-precision-aware-optimizer",
                                              "--main-params-dtype",
                                              "--main-grads-dtype",
                                              "--exp-avg-dtype",
                                              "--exp-avg-sq-dtype"};

struct SimulateFlags {
  RunFlags run;
  std::string hardware;
  int gpus = 0;
  bool explain = false;
};

// The layout line's words for --zero (ds: DeepSpeed's engine).
const char* zero_words(int zero, bool ds) {
  switch (zero) {
    case 1: return ds ? ", ZeRO-1 (DeepSpeed's)" : ", distributed optimizer (ZeRO-1)";
    case 2: return ", ZeRO-2 (optimizer state and gradients sharded)";
    case 3: return ", ZeRO-3 (DeepSpeed)";
    default: return "";
  }
}

// The worst stage's time after its pipeline, part by part (the parts that took none left out).
std::string after_pipeline_text(const sim::SimResult& r, const ParallelConfig& p, bool ds) {
  const int zero = p.zero;
  const char* reduce = zero == 2   ? "data-parallel reduce-scatters of every backward"
                       : zero != 1 ? "data-parallel all-reduce"
                       : ds        ? "data-parallel all-reduce (DeepSpeed's ZeRO-1)"
                                   : "data-parallel reduce-scatter";
  std::vector<std::string> parts;
  auto part = [&](double t, const std::string& what, bool even_none = false) {
    if (t > 0 || even_none) parts.push_back(fmt::format("{} {:.3g} s", what, t));
  };
  // The reduction wherever there is a data-parallel group, also where the backward hid all of it.
  part(r.dp_reduce_exposed_s, std::string(reduce) + (r.dp_overlapped ? ": not hidden by the backward" : ""),
       p.dp * p.cp > 1);
  part(r.embedding_allreduce_s, "embedding all-reduce");
  part(r.optimizer_s, "optimizer");
  part(r.param_gather_s, "parameter all-gather (not hidden by the next forward)");
  part(r.model_sync_s, "gradient-norm and overflow-check syncs");
  return parts.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(parts, ", "));
}

std::string pass_line(const sim::PassCost& c) {
  return fmt::format("{:.2f} (GEMM {:.2f}, attention {:.2f}, memory-bound {:.2f}, TP communication {:.2f})",
                     c.total() * 1e3, c.gemm * 1e3, c.attention * 1e3, c.membound * 1e3, c.tp_comm * 1e3);
}

// What a kernel does: a GEMM's shape and FLOPs, the bytes a memory-bound kernel moves, a
// collective's buffer and how it overlaps.
std::string kernel_work(const sim::Kernel& k) {
  switch (k.kind) {
    case sim::KernelKind::Gemm:
    case sim::KernelKind::Attention:
      return fmt::format("{:g} x {:g} x {:g}{}, {:.4g} GFLOP", k.m, k.n, k.k,
                         k.batch != 1 ? fmt::format(" x {:g}", k.batch) : std::string(), k.flops() / 1e9);
    case sim::KernelKind::Membound:
      return fmt::format("{:.4g} MB{}", k.bytes / 1e6, k.whole != 1 ? fmt::format(" x {:.4g}", k.part / k.whole) : "");
    case sim::KernelKind::TpComm: break;
  }
  if (k.overlap == sim::Overlap::SmMargin) return sim::overlap_name(k.overlap);
  const std::string overlap = k.overlap == sim::Overlap::None ? "" : fmt::format(", {}", sim::overlap_name(k.overlap));
  const char* group = k.group == sim::Group::Context ? " over the context-parallel group" : "";
  return fmt::format("{} of {:.4g} MB{}{}", sim::collective_name(k.collective), k.bytes / 1e6, group, overlap);
}

// --explain: every kernel and collective of one micro-batch on one device with its time, in the
// cost model's order, then each pass's total as the lines above print it.
void print_kernels(const RunConfig& c, const sim::HardwareProfile& hw) {
  const sim::CostModel cm(c, hw);
  const sim::KernelCosting costs = cm.costing();
  fmt::print("  kernels of one micro-batch on one device (--explain), ms:\n");
  const std::pair<sim::Where, const char*> parts[] = {
      {sim::Where::Layer, "layer"}, {sim::Where::Embedding, "embedding"}, {sim::Where::Head, "output layer"}};
  for (const auto& [where, part] : parts)
    for (sim::Phase phase : {sim::Phase::Forward, sim::Phase::Recompute, sim::Phase::Backward}) {
      bool any = false;
      for (const sim::Kernel& k : cm.kernels) {
        if (k.where != where || k.phase != phase) continue;
        any = true;
        const std::string name = k.detail ? fmt::format("{} {}", k.name, k.detail) : std::string(k.name);
        const std::string module = where == sim::Where::Layer ? fmt::format("{}{}", layer_module_name(k.module),
                                                                             k.pre ? " (before its weights)" : "")
                                                              : std::string(part);
        fmt::print("    {:<9} {:<26} {:<36} {:<16} {:>9.4f}  {}{}\n", sim::phase_name(phase), module, name,
                   sim::kind_name(k.kind), sim::kernel_time(k, cm.kernels, costs) * 1e3, kernel_work(k),
                   k.op ? fmt::format(" [{}]", k.op) : "");
      }
      if (any) fmt::print("    {} {}: {}\n", part, sim::phase_name(phase), pass_line(cm.pass_cost(where, phase)));
    }
}

// The profile decides the backend and, unless --precision is given, the precision; --gpus is
// the number of ranks.
void apply_profile_and_gpus(const CLI::App& app, SimulateFlags& f, const sim::HardwareProfile& hw) {
  check_choices(f.run);
  RunConfig& r = f.run.run;
  r.backend = hw.kind == "cpu" ? BackendKind::Cpu : BackendKind::Cuda;
  if (app.count("--precision") == 0) r.precision = hw.default_precision;
  if (!(hw.peak(r.precision) > 0))
    usage_error("--precision {}: hardware profile '{}' ({}) has no {} peak", r.precision, hw.name, hw.path, r.precision);
  if (app.count("--gpus") == 0) return;
  const ParallelConfig& p = r.par;
  if (f.gpus <= 0) usage_error("--gpus {} must be positive", f.gpus);
  if (app.count("--ranks") && r.ranks != f.gpus) usage_error("--gpus {} and --ranks {} must agree", f.gpus, r.ranks);
  // in int64: 65536 x 65536 must not wrap to 0; the context-parallel ranks count (t x c x p x d)
  const int64_t tp_pp = int64_t(p.tp) * p.pp * std::max(p.cp, 1);
  const std::string cp = p.cp > 1 ? fmt::format(" x --context-parallel-size {}", p.cp) : std::string();
  if (p.tp > 0 && p.pp > 0 && p.dp > 0 && tp_pp * p.dp != f.gpus)
    usage_error("--gpus {} must equal --tp {} x --pp {}{} x --dp {} = {}", f.gpus, p.tp, p.pp, cp, p.dp, tp_pp * p.dp);
  if (p.tp > 0 && p.pp > 0 && f.gpus % tp_pp != 0)
    usage_error("--gpus {} must be a multiple of --tp {} x --pp {}{}", f.gpus, p.tp, p.pp, cp);
  r.ranks = f.gpus;
}

int run_simulate(const CLI::App& app, SimulateFlags& f) {
  const sim::HardwareProfile hw = sim::load_profile(f.hardware);
  apply_profile_and_gpus(app, f, hw);
  f.run.trains = false;  // the simulated step does not depend on the optimizer's settings
  const RunConfig c = resolve_run_config(app, f.run);
  // UsageError naming --stack before anything runs
  const bool ds = sim::checked_stack(c).deepspeed_engine;
  if (!c.csv.empty()) check_result_csv(c.csv);
  // after the flags are checked: a usage error stays the one line on stderr
  if (const std::string w = sim::other_cpu_warning(hw, cpu_name()); !w.empty())
    fmt::print(stderr, "ptdp: warning: {}\n", w);
  const sim::SimResult r = sim::simulate(c, hw);  // --overlap-grad-reduce is c.overlap_grad_reduce

  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.par;
  fmt::print("ptdp simulate: model {} (l={} h={} a={} s={} V={}, {:.4g}B parameters) on {} x {} ({})\n", m.name,
             m.layers, m.hidden, m.heads, m.seq_length, m.vocab_size, params_exact(m) / 1e9, c.ranks, hw.device,
             hw.name);
  const std::string stages = describe_stages(p.layer_split(m.layers));
  const std::string cp = p.cp > 1 ? fmt::format(" c={} ({})", p.cp, p.cp_comm) : std::string();
  fmt::print("  layout t={}{} p={} d={} v={}{}, b={} B={} m={}, {}, recompute {}, scatter/gather {}, {}{}{}, stack {}\n",
             p.tp, cp, p.pp, p.dp, p.vpp, stages.empty() ? "" : " (layers per stage " + stages + ")", p.micro_batch,
             p.global_batch, p.num_microbatches(), p.schedule,
             enum_name(p.recompute), p.scatter_gather ? "on" : "off", c.precision,
             p.sequence_parallel ? ", sequence parallel" : "",
             zero_words(p.zero, ds), c.stack);
  fmt::print("  one layer, one micro-batch, ms: forward {}\n", pass_line(r.layer.forward));
  fmt::print("                                  recompute {}\n", pass_line(r.layer.recompute));
  fmt::print("                                  backward {}\n", pass_line(r.layer.backward));
  if (f.explain) print_kernels(c, hw);
  fmt::print("  memory: {}\n", r.memory.describe(hw.device));
  if (r.memory.stages.size() > 1) {  // what each stage's allocator hands out at its peak
    std::vector<std::string> in_use;
    for (const sim::StageMemory& st : r.memory.stages) in_use.push_back(fmt::format("{:.4g}", st.in_use() / 1e9));
    fmt::print("  in use per stage, GB (without the reserved): {}\n", fmt::join(in_use, " "));
  }
  if (!r.memory.fits) {
    std::fprintf(stderr, "ptdp: %s\n", r.memory.describe(hw.device).c_str());  // "out of memory: ..."
    return 1;
  }
  if (p.zero == 3) {
    const sim::Zero3Timeline& z = r.zero3;
    fmt::print("  iteration {:.4g} s: ZeRO-3 forward and backward {:.4g} s (compute {:.4g} s, parameter gathers and "
               "gradient reduce-scatters {:.4g} s on the network, {:.3g} s of it not hidden), then optimizer {:.3g} s\n",
               r.iter_time_s, r.pipeline_time_s, z.compute_s, z.comm_s, z.exposed_comm_s, r.optimizer_s);
    fmt::print("  ZeRO-3 traffic per GPU: {:.0f} all-gathers, {:.4g} GB gathered, {:.4g} GB reduce-scattered\n",
               z.gathers, z.gather_bytes / 1e9, z.reduce_bytes / 1e9);
  } else {
    fmt::print("  iteration {:.4g} s: pipeline {:.4g} s (bubble t_pb/t_id {:.3f}, {:.0f}% of it idle), then {:.3g} s: "
               "{}\n",
               r.iter_time_s, r.pipeline_time_s, r.bubble_fraction, 100.0 * r.bubble_fraction / (1.0 + r.bubble_fraction),
               r.post_time_s, after_pipeline_text(r, p, ds));
  }
  fmt::print("  throughput {:.4g} TFLOP/s per GPU ({:.1f}% of peak), {:.4g} PFLOP/s in all, {:.0f} tokens/s, "
             "{:.3g} sequences/s\n",
             r.tflops_per_gpu, r.pct_peak, r.tflops_per_gpu * c.ranks / 1e3, r.tokens_per_s, r.seq_per_s);
  // Eq. (3) counts a recomputed forward whatever --recompute says; the model FLOPs do not (MFU).
  fmt::print("  model FLOPs {:.4g} TFLOP/s per GPU (MFU {:.1f}% of peak), {:.0f} tokens/s per GPU\n",
             r.model_tflops_per_gpu, r.pct_peak * r.model_tflops_per_gpu / r.tflops_per_gpu,
             r.tokens_per_s / c.ranks);
  if (!c.csv.empty()) {
    const ResultRow row = make_simulated_row(c, hw, r);
    append_result_rows(c.csv, {row});
    fmt::print("appended a row to {}\n", c.csv);
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> add_simulate_command(CLI::App& app) {
  auto f = std::make_shared<SimulateFlags>();
  f->run.run.experiment = "simulate";
  CLI::App* sub = app.add_subcommand(
      "simulate", "predict one iteration on a hardware profile and append one result row (mode=simulate)");
  add_model_flags(*sub, f->run);
  add_parallel_flags(*sub, f->run);
  // Of the run's own settings, those the simulated iteration or its row depends on; the training
  // run's (iterations, data, checkpoints, loss scaling, logging, --backend and --comm, the
  // optimizer and --recipe) are not simulate's flags: its --help lists none, and one given is
  // refused, naming the command that takes it (cli_main).
  for (const char* flag : kSimulatedRunFlags) add_field_flag(*sub, flag, f->run);
  sub->add_option("--hardware", f->hardware,
                  "hardware profile: a name in hardware/ (a100-selene, h100-dgx, h200, cpu) or a .toml file; "
                  "--precision defaults to the profile's")
      ->required();
  sub->add_option("--gpus", f->gpus, "number of devices (default: t*p*d)");
  add_field_flag(*sub, "--stack", f->run);
  add_field_flag(*sub, "--fp8-format", f->run);
  add_field_flag(*sub, "--fp8-param-gather", f->run);
  sub->add_flag("--explain", f->explain,
                "also print every kernel and collective of one micro-batch with its time (the cost model's list)");
  return {sub, [sub, f]() { return run_simulate(*sub, *f); }};
}

}  // namespace ptdp
