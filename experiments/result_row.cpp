#include "experiments/result_row.h"

#include "core/accounting/flops.h"
#include "core/results/provenance.h"

namespace ptdp {

ResultRow make_result_row(const RunConfig& c, const std::string& mode, double iter_ms, double peak_flops) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.par;
  const double sec = iter_ms / 1e3;
  const int gpus = c.ranks > 0 ? c.ranks : p.tp * p.pp * p.dp;
  ResultRow r = config_row(c, mode);
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

ResultRow make_profile_row(const RunConfig& c, const sim::HardwareProfile& hw, double iter_ms) {
  RunConfig rc = c;
  rc.iters = 1;
  ResultRow row = make_result_row(rc, "simulate", iter_ms, hw.peak(c.precision));
  row.set("backend", hw.name);
  if (hw.kind == "gpu") row.set("comm", CommKind::Nccl);
  return row;
}

ResultRow make_simulated_row(const RunConfig& c, const sim::HardwareProfile& hw, const sim::SimResult& r) {
  ResultRow row = make_profile_row(c, hw, r.iter_time_s * 1e3);
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
