#include "core/sim/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/common/error.h"

namespace ptdp::sim {

PassCost& PassCost::operator+=(const PassCost& o) {
  gemm += o.gemm;
  attention += o.attention;
  membound += o.membound;
  tp_comm += o.tp_comm;
  return *this;
}

PassCost PassCost::operator*(double f) const { return {gemm * f, attention * f, membound * f, tp_comm * f}; }

double gemm_time(const HardwareProfile& hw, double peak, int elem, double m, double n, double k, double batch) {
  const double flops = 2.0 * m * n * k * batch;
  const double compute = flops / (peak * hw.gemm.efficiency(m, n, k, batch));
  const double traffic = double(elem) * (m * k + k * n + m * n) * batch;
  const double memory = traffic / (hw.memory_bw * hw.membound_efficiency);
  return std::max(compute, memory) + hw.launch_overhead_s;
}

namespace {

// Accumulates the kernels of one pass.
struct Pass {
  const CostModel& cm;
  PassCost c;
  int t;         // tensor-parallel ranks
  int per_node;  // of them in one node

  void gemm(double m, double n, double k) { c.gemm += gemm_time(cm.hw, cm.peak, cm.elem, m, n, k); }
  void attn(double m, double n, double k, double batch) {
    c.attention += gemm_time(cm.hw, cm.peak, cm.elem, m, n, k, batch);
  }
  // A memory-bound kernel moving `bytes`.
  void mem(double bytes) {
    c.membound += bytes / (cm.hw.memory_bw * cm.hw.membound_efficiency) + cm.hw.launch_overhead_s;
  }
  void allreduce(double bytes) { c.tp_comm += cm.net.allreduce(bytes, t, per_node); }
  // The three GEMMs of a linear layer Y[m,n] = X[m,k] W[k,n] in backward: dX and dW.
  void gemm_backward(double m, double n, double k) {
    gemm(m, k, n);
    gemm(k, n, m);
  }
};

}  // namespace

CostModel::CostModel(const RunConfig& c, const HardwareProfile& profile, const SimOptions& o)
    : hw(profile), net(profile), cfg(c), opt(o) {
  const ModelConfig& mc = cfg.model;
  const ParallelConfig& pc = cfg.par;
  peak = hw.peak(cfg.precision);
  if (!(peak > 0))
    usage_error("--precision {}: hardware profile '{}' ({}) has no {} peak", cfg.precision, hw.name, hw.path,
                cfg.precision);
  elem = HardwareProfile::element_bytes(cfg.precision);
  const double E = elem;
  const int t = pc.tp;
  const int per_node = std::min(t, hw.gpus_per_node);
  const double b = pc.micro_batch, s = mc.seq_length, h = mc.hidden, a = mc.heads;
  const double rows = b * s, ht = h / t, at = a / t, hd = h / a, ft = 4.0 * h / t;
  const double vt = double(mc.padded_vocab(t)) / t;
  const double scores = b * at * s * s;  // attention score elements on this device
  const double bsh = rows * h;

  // ---- forward of one layer ----
  auto layer_forward = [&](Pass& f, bool core_attention_only) {
    if (!core_attention_only) {
      f.mem(2 * E * bsh);        // LayerNorm 1
      f.gemm(rows, 3 * ht, h);   // QKV (bias in the GEMM epilogue)
    }
    f.attn(s, s, hd, b * at);    // Q K^T
    f.mem(2 * E * scores);       // fused scale + causal mask + softmax
    f.mem((2 * E + 1) * scores); // attention dropout (1-byte mask)
    f.attn(s, hd, s, b * at);    // P V
    if (core_attention_only) return;
    f.mem(2 * E * rows * ht);    // [b, a, s, d] -> [s, b, h] copy
    f.gemm(rows, h, ht);         // output projection
    f.allreduce(E * bsh);        // g: row-parallel output
    f.mem((3 * E + 1) * bsh);    // fused bias + dropout + residual add
    f.mem(2 * E * bsh);          // LayerNorm 2
    f.gemm(rows, ft, h);         // fc1
    f.mem(2 * E * rows * ft);    // fused bias + GeLU
    f.gemm(rows, h, ft);         // fc2
    f.allreduce(E * bsh);        // g
    f.mem((3 * E + 1) * bsh);    // fused bias + dropout + residual add
  };
  Pass fwd{*this, {}, t, per_node};
  layer_forward(fwd, false);
  layer.forward = fwd.c;

  Pass rc{*this, {}, t, per_node};
  if (pc.recompute == Recompute::Full) layer_forward(rc, false);
  if (pc.recompute == Recompute::Selective) layer_forward(rc, true);
  layer.recompute = rc.c;

  // ---- backward of one layer ----
  Pass bw{*this, {}, t, per_node};
  bw.mem((3 * E + 1) * bsh);      // bias-dropout-add backward (+ residual gradient sum)
  bw.gemm_backward(rows, h, ft);  // fc2
  bw.mem(E * bsh);                // fc2 bias gradient (column sums)
  bw.mem(3 * E * rows * ft);      // GeLU backward
  bw.gemm_backward(rows, ft, h);  // fc1
  bw.mem(E * rows * ft);          // fc1 bias gradient
  bw.allreduce(E * bsh);          // f: column-parallel input gradient
  bw.mem(4 * E * bsh);            // LayerNorm 2 backward (x, dy, dx, residual sum)
  bw.mem((3 * E + 1) * bsh);      // bias-dropout-add backward
  bw.gemm_backward(rows, h, ht);  // output projection
  bw.mem(E * bsh);                // its bias gradient
  bw.mem(2 * E * rows * ht);      // copy back to [b, a, s, d]
  bw.attn(s, s, hd, b * at);      // dP = dY V^T
  bw.attn(s, hd, s, b * at);      // dV = P^T dY
  bw.mem((2 * E + 1) * scores);   // dropout backward
  bw.mem(3 * E * scores);         // softmax backward
  bw.attn(s, hd, s, b * at);      // dQ = dS K
  bw.attn(s, hd, s, b * at);      // dK = dS^T Q
  bw.mem(2 * E * 3 * rows * ht);  // q, k, v gradients into the fused QKV layout
  bw.gemm_backward(rows, 3 * ht, h);  // QKV
  bw.mem(E * 3 * rows * ht);      // its bias gradient
  bw.allreduce(E * bsh);          // f
  bw.mem(4 * E * bsh);            // LayerNorm 1 backward
  // Weight gradients are accumulated into the main-gradient buffer (read grad, read and write
  // main_grad): Megatron v2.5 has no fused gradient accumulation.
  params_per_layer = 12.0 * h * h / t + 7.0 * h / t + 6.0 * h;
  bw.mem((E + 2.0 * opt.grad_bytes) * params_per_layer);
  layer.backward = bw.c;

  // ---- embedding (first stage) and output layer (last stage) ----
  params_embedding = vt * h;
  params_position = s * h;
  Pass ef{*this, {}, t, per_node};
  ef.mem(3 * E * bsh);           // word-embedding gather + position embedding add
  ef.allreduce(t > 1 ? E * bsh : 0);  // vocab-parallel embedding
  ef.mem((2 * E + 1) * bsh);     // embedding dropout
  edges.embed_forward = ef.c;
  Pass eb{*this, {}, t, per_node};
  eb.mem((2 * E + 1) * bsh);     // dropout backward
  eb.mem(E * params_embedding);  // dense embedding gradient: zero-fill
  eb.mem(3 * E * bsh);           // scatter-add of the rows
  eb.mem((E + 2.0 * opt.grad_bytes) * (params_embedding + params_position));  // into main_grad
  edges.embed_backward = eb.c;

  const double logits = rows * vt;
  Pass hf{*this, {}, t, per_node};
  hf.mem(2 * E * bsh);           // final LayerNorm
  hf.gemm(rows, vt, h);          // logits
  hf.mem((E + 4) * logits);      // to fp32
  hf.mem(4 * logits);            // max
  hf.mem(8 * logits);            // subtract
  hf.mem(8 * logits);            // exp
  hf.mem(4 * logits);            // sum
  hf.mem(8 * logits);            // normalise (kept for backward)
  hf.allreduce(4 * rows);        // max, target logit, sum: three small all-reduces
  hf.allreduce(4 * rows);
  hf.allreduce(4 * rows);
  edges.head_forward = hf.c;
  Pass hb{*this, {}, t, per_node};
  hb.mem(8 * logits);            // softmax - one-hot
  hb.mem((4 + E) * logits);      // scale, back to fp16
  hb.gemm_backward(rows, vt, h); // logits
  hb.mem((E + 2.0 * opt.grad_bytes) * params_embedding);  // output-weight gradient into main_grad
  hb.allreduce(E * bsh);         // f: column-parallel input gradient
  hb.mem(4 * E * bsh);           // final LayerNorm backward
  edges.head_backward = hb.c;

  // ---- pipeline sends: b*s*h activations; scatter/gather sends 1/t per rank, then an NVLink all-gather
  act_bytes = E * bsh;
  const bool sg = pc.scatter_gather && t > 1;
  const double piece = sg ? act_bytes / t : act_bytes;
  send_cross = net.p2p(piece, true);
  send_local = net.p2p(piece, false);
  gather = sg ? net.allgather(act_bytes, t, per_node) + hw.launch_overhead_s : 0.0;

  // Adam on fp32 master weights, per parameter: copy the fp16 gradient to fp32 (2+4), unscale and
  // check for inf (4+4), norm (4), Adam (grad, param, m, v read; param, m, v written: 28), copy
  // the master to fp16 (4+2), zero the gradient buffer (2). f32 training: no copies (4+28+4).
  optimizer_bytes_per_param = cfg.precision == "f32" ? 4 + 4 + 28 + 4 : 6 + 8 + 4 + 28 + 6 + opt.grad_bytes;
}

int CostModel::node_of_stage(int stage) const {
  const long long first_rank = 1LL * stage * cfg.par.tp * cfg.par.dp;
  return int(first_rank / hw.gpus_per_node);
}

bool CostModel::cross_node(int from_stage, int to_stage) const {
  // Tensor-parallel groups wider than a node always leave it; otherwise compare the nodes.
  if (cfg.par.tp > hw.gpus_per_node) return true;
  return node_of_stage(from_stage) != node_of_stage(to_stage);
}

double CostModel::dp_allreduce(double params) const {
  const int d = cfg.par.dp, t = cfg.par.tp;
  if (d <= 1) return 0;
  // Data-parallel peers of a rank are t ranks apart: gpus_per_node / t of them share its node.
  const int per_node = t >= hw.gpus_per_node ? 1 : std::min(d, hw.gpus_per_node / t);
  return net.allreduce(params * opt.grad_bytes, d, per_node);
}

double CostModel::embedding_allreduce() const {
  if (cfg.par.pp <= 1) return 0;
  const bool cross = cross_node(0, cfg.par.pp - 1);
  return net.allreduce(params_embedding * opt.grad_bytes, 2, cross ? 1 : 2);
}

double CostModel::optimizer_step(double params) const {
  return params * optimizer_bytes_per_param / (hw.memory_bw * hw.membound_efficiency) + 20 * hw.launch_overhead_s;
}

double CostModel::model_parallel_sync() const {
  const int mp = cfg.par.tp * cfg.par.pp;
  if (mp <= 1) return 0;
  const bool cross = mp > hw.gpus_per_node;
  // Two all-reduces of one number (found-inf, grad norm): latency only.
  return 2 * net.allreduce(4, mp, cross ? std::min(cfg.par.tp, hw.gpus_per_node) : mp);
}

}  // namespace ptdp::sim
