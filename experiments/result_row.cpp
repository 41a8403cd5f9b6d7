#include "experiments/result_row.h"

#include "core/accounting/flops.h"
#include "core/results/provenance.h"

namespace ptdp {

ResultRow make_result_row(const RunConfig& c, const std::string& mode, double iter_ms, double peak_flops) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.par;
  const double sec = iter_ms / 1e3;
  const int gpus = c.ranks > 0 ? c.ranks : p.tp * p.pp * p.dp;
  ResultRow r;
  r.set("experiment", c.experiment);
  r.set("mode", mode);
  r.set("backend", c.backend);
  r.set("comm", c.comm);
  r.set("precision", c.precision);
  r.set("model", m.name);
  r.set("params", static_cast<long long>(params_exact(m)));
  r.set("layers", m.layers);
  r.set("hidden", m.hidden);
  r.set("heads", m.heads);
  r.set("seq_length", m.seq_length);
  r.set("vocab_size", static_cast<long long>(m.vocab_size));
  r.set("gpus", gpus);
  r.set("tp", p.tp);
  r.set("pp", p.pp);
  r.set("dp", p.dp);
  r.set("vpp", p.vpp);
  r.set("micro_batch", p.micro_batch);
  r.set("global_batch", p.global_batch);
  r.set("num_microbatches", p.num_microbatches());
  r.set("schedule", p.schedule);
  r.set("recompute", std::string(recompute_name(p.recompute)));
  r.set("scatter_gather", p.scatter_gather ? 1 : 0);
  r.set("sequence_parallel", p.sequence_parallel ? 1 : 0);
  r.set("zero", p.zero);
  r.set("arch", std::string(arch_name(m.arch)));
  // The shape beyond layers, hidden and heads, empty where it is the default (multi-head attention,
  // the arch's MLP rule, eps 1e-5), as rows written before these columns existed read.
  if (m.gqa()) r.set("query_groups", m.groups());
  ModelConfig rule = m;
  rule.ffn_hidden_size = 0;
  if (m.ffn_hidden() != rule.ffn_hidden()) r.set("ffn_hidden_size", static_cast<long long>(m.ffn_hidden()));
  if (m.layernorm_eps != ModelConfig{}.layernorm_eps) r.set("norm_eps", m.layernorm_eps);
  if (!p.layout_chunks.empty())  // --pipeline-model-parallel-layout, one spelling: "E1|2|2|1L"
    r.set("stage_layers", canonical_layout(p.layout_chunks));
  else if (p.embedding_in_split || p.loss_in_split)  // --account-for-*-in-pipeline-split: what counts as a layer
    r.set("stage_layers", p.embedding_in_split && p.loss_in_split ? "embedding+loss"
                          : (p.embedding_in_split ? "embedding" : "loss"));
  else if (p.layer_split(m.layers).uneven())  // --decoder-first/last-pipeline-num-layers, "FIRST:LAST" (0: even share)
    r.set("stage_layers", std::to_string(p.first_stage_layers) + ":" + std::to_string(p.last_stage_layers));
  if (mode == "simulate") r.set("stack", c.stack);  // the software modelled; a measured run is ptdp's own
  if (mode != "simulate") {  // what a measured run trained on
    r.set("data", c.data);
    r.set("data_order", c.data_order);
  }
  r.set("iters", c.iters);
  r.set("iter_time_ms", iter_ms);
  const double tflops = flops_eq3(m, p.global_batch) / sec / gpus / 1e12;
  r.set("tflops_per_gpu", tflops);
  if (peak_flops > 0) r.set("pct_peak", 100.0 * tflops * 1e12 / peak_flops);
  r.set("tokens_per_s", double(p.global_batch) * m.seq_length / sec);
  r.set("seq_per_s", double(p.global_batch) / sec);
  r.set("git_sha", git_sha());
  r.set("host", host_name());
  r.set("timestamp", utc_timestamp());
  r.set("model_tflops_per_gpu", flops_model(m, p.global_batch) / sec / gpus / 1e12);
  return r;
}

ResultRow make_simulated_row(const RunConfig& c, const sim::HardwareProfile& hw, const sim::SimResult& r) {
  RunConfig rc = c;
  rc.backend = hw.name;
  rc.comm = hw.kind == "gpu" ? "nccl" : c.comm;
  rc.iters = 1;
  ResultRow row = make_result_row(rc, "simulate", r.iter_time_s * 1e3, hw.peak(c.precision));
  row.set("bubble_fraction", r.bubble_fraction);
  row.set("peak_mem_gb", r.memory.peak / 1e9);
  row.set("device", hw.device);
  row.set("fwd_ms", r.stage0.forward_s * 1e3);
  row.set("bwd_ms", r.stage0.backward_s * 1e3);
  row.set("p2p_wait_ms", r.stage0.p2p_wait_s * 1e3);
  row.set("dp_ms", r.stage0.dp_s * 1e3);
  row.set("optimizer_ms", r.stage0.optimizer_s * 1e3);
  row.set("p2p_bytes", static_cast<long long>(r.stage0.p2p_bytes));
  row.set("activation_gb", r.activation_bytes / 1e9);
  // One layer, one micro-batch (Korthikanti et al.'s Table 4); backward with its recomputation.
  row.set("layer_fwd_ms", r.layer.forward.total() * 1e3);
  row.set("layer_bwd_ms", (r.layer.recompute.total() + r.layer.backward.total()) * 1e3);
  return row;
}

}  // namespace ptdp
