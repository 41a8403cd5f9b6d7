#include "experiments/reproduce_llama.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/common/regular_file.h"
#include "core/accounting/flops.h"
#include "core/config/results_csv.h"
#include "experiments/spec_value.h"
#include "experiments/sweep.h"
#include "core/sim/planner.h"
#include "core/sim/stack.h"
#include "experiments/result_row.h"

namespace ptdp {

namespace {

double days_for(double tokens, double tokens_per_s_per_gpu, int gpus) {
  return tokens / (tokens_per_s_per_gpu * gpus) / 86400.0;
}

}  // namespace

LlamaSpec parse_llama_spec(const std::string& text, const std::string& path) {
  const toml::table root = parse_spec_toml(text, path);
  LlamaSpec s;
  s.path = path;
  s.title = spec_value<std::string>(root, "title", path);
  s.gpus = int(spec_value<int64_t>(root, "gpus", path));
  s.global_batch = int(spec_value<int64_t>(root, "global_batch", path));
  const auto precision = spec_value<std::string>(root, "precision", path);
  try {
    s.precision = parse_enum<Precision>(precision, "precision");
  } catch (const UsageError& e) {
    usage_error("{}: key {}", path, one_line(e.what()));
  }
  const auto stack = spec_value<std::string>(root, "stack", path);
  try {
    s.stack = parse_enum<StackKind>(stack, "--stack");
  } catch (const UsageError& e) {
    usage_error("{}: key 'stack': {}", path, one_line(e.what()));
  }
  if (s.gpus <= 0 || s.global_batch <= 0) usage_error("{}: gpus and global_batch must be positive", path);
  const toml::array* z = root["zero_modes"].as_array();
  if (!z || z->empty()) usage_error("{}: key 'zero_modes' must be a non-empty array", path);
  for (const auto& e : *z) {
    auto v = e.value<int64_t>();
    if (!v || (*v != 0 && *v != 1)) usage_error("{}: zero_modes: each must be 0 or 1 (ZeRO-3 is GPT-only)", path);
    s.zero_modes.push_back(int(*v));
  }
  const toml::array* ms = root["models"].as_array();
  if (!ms || ms->empty()) usage_error("{}: [[models]] must list at least one model", path);
  for (const auto& e : *ms) {
    const toml::table* t = e.as_table();
    if (!t) usage_error("{}: [[models]] entries must be tables", path);
    LlamaModelSpec m{spec_value<std::string>(*t, "model", path), spec_value<double>(*t, "tokens", path)};
    bool llama = false;
    try {
      llama = preset_config(m.model).arch == Arch::Llama;
    } catch (const UsageError&) {
    }
    if (!llama) usage_error("{}: model '{}' is not a llama preset", path, m.model);
    if (!(m.tokens > 0)) usage_error("{}: model '{}': tokens must be positive", path, m.model);
    s.models.push_back(m);
  }
  s.paper_model = spec_value<std::string>(root, "paper_model", path);
  s.paper_tokens_per_gpu = spec_value<double>(root, "paper_tokens_per_s_per_gpu", path);
  return s;
}

int reproduce_llama(const std::string& spec_name, const std::string& csv, const sim::HardwareProfile& hw,
                    bool dry_run) {
  const std::string spec_path = find_spec_file(spec_name);
  if (spec_path.empty()) usage_error("spec '{}': no {}.toml in {}", spec_name, spec_name, fmt::join(spec_dirs(), ", "));
  const LlamaSpec spec = parse_llama_spec(read_regular_file(spec_path, "spec"), spec_path);
  fmt::print("llama: {}\nllama: simulated on {} GPUs of {} ({}), --stack {}, B = {} sequences, {}, planner free over t, "
             "p, v, b, schedule, recompute, zero {}\n",
             spec.title, spec.gpus, hw.name, hw.device, spec.stack, spec.global_batch, spec.precision,
             fmt::join(spec.zero_modes, "/"));
  if (dry_run) {
    for (const auto& m : spec.models) fmt::print("llama: plan {} for {:.2g} tokens\n", m.model, m.tokens);
    return 0;
  }
  check_result_csv(csv, "--out");
  std::vector<ResultRow> rows;
  for (const auto& m : spec.models) {
    sim::PlanRequest req;
    req.model = preset_config(m.model);
    req.gpus = spec.gpus;
    req.global_batch = spec.global_batch;
    req.precision = spec.precision;
    req.stack = spec.stack;
    req.zero_modes = spec.zero_modes;
    req.top = 1;
    const sim::PlanResult pr = sim::plan(req, hw);
    if (pr.best.empty()) {
      fmt::print("{}: no layout fits in memory ({} layouts tried)\n", m.model, pr.layouts);
      continue;
    }
    RunConfig c = pr.best[0].cfg;
    c.experiment = "llama";
    const sim::SimResult& r = pr.best[0].result;
    const ParallelConfig& p = c.par;
    const double tok = r.tokens_per_s / spec.gpus;
    const double days = days_for(m.tokens, tok, spec.gpus);
    fmt::print("{:>9} ({:.2f}B): t={} p={} d={} v={} b={} {} recompute={} zero={} | {:.0f} tokens/s/GPU, {:.1f} "
               "TFLOP/s (model FLOPs {:.1f} TFLOP/s, MFU {:.0f}%), {:.1f} GB | {:.2g}T tokens in {:.1f} days\n",
               m.model, params_exact(c.model) / 1e9, p.tp, p.pp, p.dp, p.vpp, p.micro_batch, p.schedule,
               enum_name(p.recompute), p.zero, tok, r.tflops_per_gpu, r.model_tflops_per_gpu,
               100.0 * r.model_tflops_per_gpu * 1e12 / hw.peak(spec.precision), r.memory.peak / 1e9, m.tokens / 1e12,
               days);
    if (m.model == spec.paper_model) {
      const double pdays = days_for(m.tokens, spec.paper_tokens_per_gpu, spec.gpus);
      fmt::print("{:>9}: paper {:.0f} tokens/s/GPU ({:.1f} days) on A100-80GB; ours on {}: {:+.1f}% tokens/s, "
                 "{:.1f} days\n",
                 m.model, spec.paper_tokens_per_gpu, pdays, hw.name,
                 100.0 * (tok - spec.paper_tokens_per_gpu) / spec.paper_tokens_per_gpu, days);
    }
    rows.push_back(make_simulated_row(c, hw, r));
  }
  update_result_file(csv, [&](const std::string&) {
    std::string out = result_header_line() + "\n";
    for (const auto& r : rows) out += r.to_csv_line() + "\n";
    return out;
  });
  fmt::print("llama: {} rows in {}\n", rows.size(), csv);
  return 0;
}

}  // namespace ptdp
