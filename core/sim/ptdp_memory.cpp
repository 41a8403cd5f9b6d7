#include "core/sim/ptdp_memory.h"

#include <algorithm>

#include "core/backend/attention_choice.h"
#include "core/sim/hardware.h"

namespace ptdp::sim {

namespace {

// Element counts of one layer on one rank (core/model/layer.h LayerDims): rows n = b*s, the
// rows kept outside the tensor-parallel GEMMs nl (n/t with sequence parallelism).
struct PtdpDims {
  double E, n, nl, h, t, s, b, heads, kv, hd, f;
  bool llama;
  bool block;  // --attention-backend cudnn: block attention on q, k, v split from qkv (block_attention_path.cpp)
  explicit PtdpDims(const RunConfig& c)
      : E(HardwareProfile::element_bytes(c.precision)),
        n(double(c.par.micro_batch) * c.model.seq_length),
        nl(c.par.sequence_parallel && c.par.tp > 1 ? n / c.par.tp : n),
        h(c.model.hidden),
        t(c.par.tp),
        s(c.model.seq_length),
        b(c.par.micro_batch),
        heads(double(c.model.heads) / c.par.tp),
        kv(double(c.model.groups()) / c.par.tp),
        hd(double(c.model.hidden) / c.model.heads),
        f(c.model.ffn_hidden()),
        llama(c.model.arch == Arch::Llama),
        block(c.attention_backend == AttentionBackend::Cudnn) {}
  double stat() const { return E < 4 ? 4.0 : E; }           // acc_dtype: f32 statistics
  double probs() const { return E * b * heads * s * s; }    // one s x s tensor per head
  double heads_cols() const { return heads * hd; }          // the attention's output columns
  double qkv_cols() const { return (heads + 2 * kv) * hd; }
  bool gqa() const { return kv != heads; }
};

}  // namespace

namespace {

double kept_bytes(const RunConfig& cfg, Recompute mode, bool recompute_act) {
  const PtdpDims d(cfg);
  if (mode == Recompute::Full) return d.E * d.nl * d.h;  // x only
  const double norms = d.E * d.nl * d.h * 4 + d.stat() * d.nl * (d.llama ? 2 : 4);  // x ln1 x2 ln2, stats
  // fc (llama: gate|up) and act, unless --recompute-activation rebuilds act in backward
  const double mlp = d.E * d.n * ((d.llama ? 2 : 1) + (recompute_act ? 0 : 1)) * d.f / d.t;
  const double qkv = d.E * d.n * d.qkv_cols();  // qkv (block attention: q, k and v split from it)
  // atty (block attention: with its f32 lse, both dropped by selective recomputation)
  const double core = d.E * d.n * d.heads_cols() + (d.block ? d.stat() * d.b * d.heads * d.s : 0.0);
  if (d.block) return norms + mlp + qkv + (mode == Recompute::None ? core : 0.0);
  return norms + mlp + qkv + core + (mode == Recompute::None ? d.probs() : 0.0);
}

}  // namespace

double ptdp_layer_kept_bytes(const RunConfig& cfg, Recompute mode) {
  return kept_bytes(cfg, mode, cfg.par.recompute_activation);
}

double ptdp_backward_peak_bytes(const RunConfig& cfg, Recompute mode) {
  const PtdpDims d(cfg);
  // The whole cache exists again during the backward (recomputed where the mode, or
  // --recompute-activation, dropped it).
  const double cache = kept_bytes(cfg, Recompute::None, false) - ptdp_layer_kept_bytes(cfg, mode);
  const double rows_h = d.E * d.nl * d.h;
  // Full recomputation's forward writes a y it keeps to the function's end.
  const double recomputed = cache + (mode == Recompute::Full ? rows_h : 0.0);
  const double sp_part = d.nl < d.n ? d.E * d.n * d.h : 0.0;  // partial_rows before the reduce-scatter
  const double f = d.E * d.n * d.f / d.t;                     // one [n, f/t] tensor
  // The MLP's backward at its widest, beside the whole cache, dy and dx: gpt's fc2 backward
  // (dact beside act and fc); llama's SwiGLU backward (dact and dfc beside fc, act released).
  const double mlp = recomputed + (d.llama ? 2 : 1) * f + 2 * rows_h + sp_part;
  // The MLP's tensors are released before the attention's backward (layer.cpp): fc, act, ln2, x2
  // and ln2's statistics.
  const double released = f * (d.llama ? 3 : 2) + 2 * rows_h + d.stat() * d.nl * (d.llama ? 1 : 2);
  const double qkv = d.E * d.n * d.qkv_cols();
  // dheads (block attention: dq, dk, dv)
  const double dheads = d.block ? qkv : d.E * d.n * 3 * d.heads_cols();
  const double held = 2 * rows_h /* dln dx2 */ + sp_part + d.E * d.n * d.heads_cols() /* datty */ + dheads +
                      2 * rows_h /* dy, dx */;
  if (d.block) {
    // Inside cuDNN's backward its deterministic dP workspace (b a/t s s 2 bytes on Hopper, for the
    // groups of one call: attention_choice.h, cudnn_backward_groups) beside dq, dk, dv; after it,
    // the joined dqkv.
    const int b = int(d.b), s = int(d.s), a = int(d.heads), g = int(d.kv);
    const int calls = g / cudnn_backward_groups(b, s, s, a, g);
    const double workspace = double(cudnn_dp_workspace_bytes(b, a / calls, s, s)) + (calls > 1 ? 4.0 * b * a / calls * s : 0.0);
    return std::max(mlp, recomputed - released + held + std::max(workspace, qkv));
  }
  // attention_qkv expands the groups to every head for the op (GQA only).
  const double expanded = d.gqa() ? d.E * d.n * 3 * d.heads_cols() : 0.0;
  const double op = d.E * d.n * d.heads_cols() * (3 + 3 + 1) + d.probs();  // qh, dqh, dyh, dP
  return std::max(mlp, recomputed - released + held + expanded + op);
}

double ptdp_head_peak_bytes(const RunConfig& cfg) {
  const PtdpDims d(cfg);
  const double vocab = double(cfg.model.padded_vocab(cfg.par.tp)) / cfg.par.tp;
  return d.E * d.n * vocab + d.E * d.nl * d.h * 2 + 4 * d.stat() * d.n;  // logits (then dlogits in place); lnf, dlnf
}

double ptdp_state_bytes_per_param(const RunConfig& cfg, const PrecisionKnobs& knobs) {
  const double E = HardwareProfile::element_bytes(cfg.precision);
  const bool mixed = E < 4;
  // The master copy (mixed only), m and v.
  const double sharded = (mixed ? knobs.main_param_bytes : 0.0) + knobs.exp_avg_bytes + knobs.exp_avg_sq_bytes;
  const double d = cfg.par.zero == 1 ? std::max(cfg.par.dp, 1) : 1;
  return E + 4 + sharded / d;
}

}  // namespace ptdp::sim
