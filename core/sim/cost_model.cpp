#include "core/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

const char* module_name(LayerModule m) {
  switch (m) {
    case kModuleQkv: return "qkv";
    case kModuleProj: return "proj";
    case kModuleFc1: return "fc1";
    case kModuleFc2: return "fc2";
    default: return "?";
  }
}

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

  double gemm(double m, double n, double k) {
    const double x = gemm_time(cm.hw, cm.peak, cm.elem, m, n, k);
    c.gemm += x;
    return x;
  }
  void attn(double m, double n, double k, double batch) {
    c.attention += gemm_time(cm.hw, cm.peak, cm.elem, m, n, k, batch);
  }
  // A memory-bound kernel moving `bytes`.
  void mem(double bytes) {
    c.membound += bytes / (cm.hw.memory_bw * cm.hw.membound_efficiency) + cm.hw.launch_overhead_s;
  }
  // A tensor-parallel collective taking `time`, of which up to `hidden` runs under a concurrent GEMM.
  void tp(double time, double hidden = 0) { c.tp_comm += std::max(0.0, time - hidden); }
  // A group of whole nodes under NCCL 2.8 (CostModel::shared_nics): a flat ring whose channels
  // leave through the NICs of the node's GPUs, all of them one group's (network.h).
  double allreduce(double bytes) const {
    if (cm.shared_nics() && per_node == cm.hw.gpus_per_node && per_node < t)
      return cm.net.allreduce_nccl28(bytes, t, std::vector<int>(size_t(cm.hw.gpus_per_node), 0), 0);
    return cm.net.allreduce(bytes, t, per_node);
  }
  double allgather(double bytes) const { return cm.net.allgather(bytes, t, per_node); }
  double reduce_scatter(double bytes) const { return cm.net.reduce_scatter(bytes, t, per_node); }
};

}  // namespace

CostModel::CostModel(const RunConfig& c, const HardwareProfile& profile, const SimOptions& o)
    : hw(profile), net(profile), cfg(c), opt(o), stack(software_stack(c.stack)) {
  const ModelConfig& mc = cfg.model;
  const ParallelConfig& pc = cfg.par;
  peak = hw.peak(cfg.precision);
  if (!(peak > 0))
    usage_error("--precision {}: hardware profile '{}' ({}) has no {} peak", cfg.precision, hw.name, hw.path,
                cfg.precision);
  elem = HardwareProfile::element_bytes(cfg.precision);
  grad_bytes = stack.grad_bytes > 0 ? stack.grad_bytes : opt.grad_bytes;
  const double E = elem;
  const int t = pc.tp;
  // A tensor-parallel group is t consecutive ranks, so where t neither divides a node's G GPUs nor
  // is a multiple of G some groups straddle nodes. Groups start at multiples of t and nodes at
  // multiples of G, so the group with the smallest share of a node has gcd(t, G) ranks there; the
  // slowest group is timed as nodes of that many (t or G where one divides the other).
  const int per_node = std::gcd(t, hw.gpus_per_node);
  const double b = pc.micro_batch, s = mc.seq_length, h = mc.hidden, a = mc.heads;
  const double rows = b * s, ht = h / t, at = a / t, hd = h / a, ft = double(mc.ffn_hidden()) / t;
  // Grouped-query attention: the QKV GEMM's columns on this device (h + 2 g hd) / t, of which the
  // keys and values are kvt = 2 g hd / t (2h/t without query groups).
  const double qkvt = double(mc.qkv_width()) / t, kvt = qkvt - ht;
  const bool gqa = mc.gqa();
  const bool llama = mc.arch == Arch::Llama;  // RMSNorm, rotary, SwiGLU, no biases or dropout
  const double vt = double(mc.padded_vocab(t)) / t;
  const double scores = b * at * s * s;  // attention score elements on this device
  const double bsh = rows * h;
  // Sequence parallelism: the norms, residuals and dropouts work on 1/t of the rows; all-gathers
  // before the column-parallel GEMMs and reduce-scatters after the row-parallel ones replace the
  // all-reduces (the same bytes on the wire: an all-reduce is a reduce-scatter and an all-gather).
  const bool sp = pc.sequence_parallel && t > 1;
  const double rowshare = sp ? 1.0 / t : 1.0;
  const bool flash = stack.flash_attention;
  // Megatron's fused causal softmax (stack.h): forward reads half the scores and writes them all,
  // backward reads half of the gradient and of the output and writes the whole gradient.
  const bool causal_softmax = fused_causal_softmax(stack, cfg);
  const double softmax_fwd_bytes = causal_softmax ? 1.5 * E : 2 * E;
  const double softmax_bwd_bytes = causal_softmax ? 2 * E : 3 * E;
  // Transformer Engine pipelines each sequence-parallel collective with the GEMM beside it
  // (userbuffers, its defaults: transformer_engine/pytorch/module/base.py, initialize_ub).
  const bool tp_pipelined = stack.tp_comm_overlap && sp;
  // Its reduce-scatters after proj/fc2 ("pipeline") and the backward's bulk all-gather and
  // reduce-scatter run on num_sm = 16 SMs, and set_sm_margin has cuBLASLt run the GEMM beside them
  // on the others (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - 16): the GEMM takes SMs / (SMs -
  // 16) as long (1.14x on 132 SMs). A profile without SMs (a CPU) loses none.
  constexpr double kUbCommSms = 16;
  const double sm_margin = hw.sms > kUbCommSms ? hw.sms / (hw.sms - kUbCommSms) : 1.0;
  // megatron-2022's asynchronous backward collectives are NCCL kernels on a stream of their own,
  // beside a cuBLAS GEMM that knows nothing of them: each of NCCL's channels holds an SM for the
  // collective's whole time, and the GEMM's blocks, scheduled by the hardware as SMs free up, get
  // the rest. Over a collective of time c beside a GEMM of time g (alone), the GEMM loses the SM
  // time c * channels / SMs; if it ends first, the collective's rest is exposed instead:
  // exposed = max(c - g, c * channels / SMs). The cost a GEMM with persistent blocks pays (Hopper;
  // docs/SIMULATOR.md, "Measured: a kernel beside a GEMM") can be larger; the profiles that give
  // nvlink.nccl_channels are the A100 ones. Inside a node only (the channel count is that of
  // NCCL's NVLink rings).
  const double nccl_sm_share =
      hw.sms > 0 && hw.nccl_channels > 0 && per_node == t ? double(hw.nccl_channels) / hw.sms : 0.0;
  auto beside_gemm = [&](Pass& x, double time, double g) {
    if (stack.tp_backward_overlap) x.tp(std::max(time - g, time * nccl_sm_share));
    else x.tp(time);
  };

  // ---- forward of one layer, module by module ----
  using Passes = std::array<Pass, kLayerModules>;
  auto passes = [&] {
    return Passes{Pass{*this, {}, t, per_node}, Pass{*this, {}, t, per_node}, Pass{*this, {}, t, per_node},
                  Pass{*this, {}, t, per_node}};
  };
  // The attention core: Q K^T, softmax, dropout, P V. Flash attention: the scores stay on chip and
  // the causal mask skips the blocks above the diagonal (half the products).
  auto core_attention = [&](Pass& q) {
    if (flash) {
      q.attn(s, s, hd, b * at / 2);
      q.attn(s, hd, s, b * at / 2);
      return;
    }
    q.attn(s, s, hd, b * at);    // Q K^T
    q.mem(softmax_fwd_bytes * scores);  // fused scale + causal mask + softmax
    if (!llama) q.mem((2 * E + 1) * scores);  // attention dropout (1-byte mask)
    q.attn(s, hd, s, b * at);    // P V
  };
  // TE's "ring_exchange" all-gather (qkv and fc1 forward, proj and fc2 input gradients): the
  // chunks move on the copy engines (use_ce, no SMs taken) while the GEMM runs as t GEMMs of
  // rows / t, one per chunk (num_splits = t), spread over several compute streams so that together
  // they fill the GPU as the whole GEMM would. The exchange of the t - 1 remote chunks runs under
  // the GEMMs of the chunks already there; what outlasts them is exposed.
  auto ring_exchange = [&](Pass& x, double ag, double g) { x.tp(ag, g * (t - 1) / t); };
  // TE's SM-based overlaps: the GEMM on SMs - 16 (above), the collective of `time` beside it.
  // "pipeline" (proj and fc2 forward): the GEMM in 4 chunks, each chunk's reduce-scatter under the
  // next chunk's GEMM, the last one after it. "bulk" (backward): the whole collective under the
  // whole GEMM.
  auto sm_overlap = [&](Pass& x, double time, double g, bool pipeline) {
    const double slowed = g * sm_margin;
    x.tp(slowed - g);
    if (pipeline) x.tp(time / 4 + 3 * std::max(0.0, time - slowed) / 4);
    else x.tp(time, slowed);
  };
  // A column-parallel GEMM fed by an all-gather (sequence parallelism) of its b*s*h input.
  auto column_forward = [&](Pass& x, double n) {
    const double ag = sp ? x.allgather(E * bsh) : 0.0;
    const double g = x.gemm(rows, n, h);
    if (tp_pipelined) ring_exchange(x, ag, g);
    else x.tp(ag);
  };
  // A row-parallel GEMM whose partial b*s*h outputs are summed over the group.
  auto row_forward = [&](Pass& x, double k) {
    const double g = x.gemm(rows, h, k);
    const double sum = sp ? x.reduce_scatter(E * bsh) : x.allreduce(E * bsh);
    if (tp_pipelined) sm_overlap(x, sum, g, true);
    else x.tp(sum);
  };
  auto layer_forward = [&](Passes& p, Passes& pre, bool core_attention_only) {
    Pass& q = p[kModuleQkv];
    if (!core_attention_only) {
      pre[kModuleQkv].mem(2 * E * bsh * rowshare);  // LayerNorm 1 (llama: RMSNorm, the same traffic)
      column_forward(q, qkvt);  // QKV (gpt: bias in the GEMM epilogue)
      if (llama) q.mem(2 * E * rows * (ht + kvt / 2));  // rotary embedding of q and k
      // Grouped-query attention without flash attention: Megatron's unfused core attention
      // expands k and v to every head (repeat_interleave: read kvt, write 2 ht per row).
      if (gqa && !flash) q.mem(E * rows * (kvt + 2 * ht));
    }
    core_attention(q);
    if (core_attention_only) return;
    q.mem(2 * E * rows * ht);    // [b, a, s, d] -> [s, b, h] copy
    Pass& o = p[kModuleProj];
    row_forward(o, ht);          // output projection, g
    o.mem((llama ? 3 * E : 3 * E + 1) * bsh * rowshare);  // residual add (gpt: fused bias + dropout)
    o.mem(2 * E * bsh * rowshare);  // LayerNorm 2 (llama: RMSNorm)
    Pass& f1 = p[kModuleFc1];
    if (llama) {
      column_forward(f1, 2 * ft);  // gate and up, one GEMM
      f1.mem(3 * E * rows * ft);   // SwiGLU: silu(gate) * up
    } else {
      column_forward(f1, ft);      // fc1
      f1.mem(2 * E * rows * ft);   // fused bias + GeLU
    }
    Pass& f2 = p[kModuleFc2];
    row_forward(f2, ft);           // fc2 (llama: down), g
    f2.mem((llama ? 3 * E : 3 * E + 1) * bsh * rowshare);  // residual add (gpt: bias + dropout too)
  };
  Passes fwd = passes(), fwd_pre = passes();
  layer_forward(fwd, fwd_pre, false);
  Passes rc = passes(), rc_pre = passes();
  if (pc.recompute == Recompute::Full) layer_forward(rc, rc_pre, false);
  if (pc.recompute == Recompute::Selective) layer_forward(rc, rc_pre, true);

  // ---- backward of one layer (fc2 first) ----
  // Column-parallel Y[rows, n] = X[rows, h] W: the input gradient, then its all-reduce (sequence
  // parallel: reduce-scatter) and the weight gradient. Megatron since Sept. 2021 runs the collective
  // during the weight-gradient GEMM, and sequence parallelism's second all-gather of X (it keeps X
  // sharded) during the input-gradient GEMM.
  // Under TE's userbuffers both are "bulk" overlaps on 16 SMs (qkv/fc1 dgrad and wgrad).
  auto column_backward = [&](Pass& x, double n) {
    const double ag = sp ? x.allgather(E * bsh) : 0.0;
    const double dgrad = x.gemm(rows, h, n);
    if (tp_pipelined) sm_overlap(x, ag, dgrad, false);
    else beside_gemm(x, ag, dgrad);
    const double reduce = sp ? x.reduce_scatter(E * bsh) : x.allreduce(E * bsh);
    const double wgrad = x.gemm(h, n, rows);
    if (tp_pipelined) sm_overlap(x, reduce, wgrad, false);
    else beside_gemm(x, reduce, wgrad);
  };
  // Row-parallel Y[rows, h] = X[rows, k] W: sequence parallelism first gathers the output gradient
  // (TE: a ring exchange under the input-gradient GEMM).
  auto row_backward = [&](Pass& x, double k) {
    const double ag = sp ? x.allgather(E * bsh) : 0.0;
    const double dgrad = x.gemm(rows, k, h);
    x.gemm(k, h, rows);
    if (tp_pipelined) ring_exchange(x, ag, dgrad);
    else x.tp(ag);
  };
  Passes bw = passes(), bw_pre = passes();
  // llama has no biases and no dropout: their backward kernels are skipped.
  if (!llama) bw_pre[kModuleFc2].mem((3 * E + 1) * bsh * rowshare);  // bias-dropout-add backward (+ residual sum)
  Pass& b2 = bw[kModuleFc2];
  row_backward(b2, ft);           // fc2 (llama: down)
  if (!llama) b2.mem(E * bsh * rowshare);  // fc2 bias gradient (column sums)
  Pass& b1 = bw[kModuleFc1];
  if (llama) {
    b1.mem(5 * E * rows * ft);    // SwiGLU backward: gate, up, dy in; dgate, dup out
    column_backward(b1, 2 * ft);  // gate and up, f
  } else {
    b1.mem(3 * E * rows * ft);    // GeLU backward
    b1.mem(E * rows * ft);        // fc1 bias gradient
    column_backward(b1, ft);      // fc1, f
  }
  Pass& po = bw_pre[kModuleProj];
  po.mem(4 * E * bsh * rowshare); // LayerNorm 2 backward (x, dy, dx, residual sum)
  if (!llama) po.mem((3 * E + 1) * bsh * rowshare);  // bias-dropout-add backward
  Pass& bo = bw[kModuleProj];
  row_backward(bo, ht);           // output projection
  if (!llama) bo.mem(E * bsh * rowshare);  // its bias gradient
  bo.mem(2 * E * rows * ht);      // copy back to [b, a, s, d]
  Pass& pq = bw_pre[kModuleQkv];
  if (flash) {
    // The fused backward recomputes Q K^T and the softmax on chip: five products over the
    // causal half (the scores, dP, dV, dQ, dK), no s x s traffic.
    pq.attn(s, s, hd, b * at / 2);
    pq.attn(s, s, hd, b * at / 2);
    pq.attn(s, hd, s, b * at / 2);
    pq.attn(s, hd, s, b * at / 2);
    pq.attn(s, hd, s, b * at / 2);
  } else {
    pq.attn(s, s, hd, b * at);    // dP = dY V^T
    pq.attn(s, hd, s, b * at);    // dV = P^T dY
    if (!llama) pq.mem((2 * E + 1) * scores);  // dropout backward
    pq.mem(softmax_bwd_bytes * scores);  // softmax backward
    pq.attn(s, hd, s, b * at);    // dQ = dS K
    pq.attn(s, hd, s, b * at);    // dK = dS^T Q
  }
  // Grouped-query attention without flash attention: the expanded k and v gradients summed back
  // to their groups (read 2 ht, write kvt per row).
  if (gqa && !flash) pq.mem(E * rows * (2 * ht + kvt));
  if (llama) pq.mem(2 * E * rows * (ht + kvt / 2));  // rotary backward of dq and dk
  pq.mem(2 * E * rows * qkvt);    // q, k, v gradients into the fused QKV layout
  Pass& bq = bw[kModuleQkv];
  if (!llama) bq.mem(E * rows * qkvt);  // its bias gradient
  column_backward(bq, qkvt);      // QKV, f
  bq.mem(4 * E * bsh * rowshare); // LayerNorm 1 backward

  // The parameters of each module on one device: its weight shard, and its biases and LayerNorm.
  // llama: gate and up are fc1 (2f), down is fc2; its only small tensors are the two RMSNorms.
  const double fh = ft * h;
  const std::array<double, kLayerModules> weights = {qkvt * h, h * h / t, (llama ? 2 : 1) * fh, fh};
  const std::array<double, kLayerModules> biases =
      llama ? std::array<double, kLayerModules>{h, h, 0, 0}
            : std::array<double, kLayerModules>{qkvt + 2 * h, h + 2 * h, ft, h};
  params_per_layer = layer_params_per_device(mc, t);
  // Weight gradients: Megatron v2.5 accumulates them into the main-gradient buffer (read grad, read
  // and write main_grad: no fused accumulation); DeepSpeed's ZeRO-3 copies each gradient into its
  // reduce bucket (read, write). One pass over the layer's parameters, shared by the modules.
  // Fused accumulation (megatron-2022, mcore): the weight-gradient GEMMs add into main_grad
  // themselves, no pass.
  // DeepSpeed's BF16_Optimizer (update_hp_grads, after every micro-batch's backward) adds each
  // bf16 gradient into an fp32 buffer: hp_grad.add_(lp_grad.to(float32)), a cast (read 2, write 4)
  // and an add (read 4 + 4, write 4). Its tied embedding's gradient is that fp32 buffer.
  const bool ds_bf16 = bf16_optimizer(stack, cfg.precision);
  const double grad_bytes_per_param = pc.zero == 3 ? 2 * E : ds_bf16 ? 2 + 4 + 12 : E + 2.0 * grad_bytes;
  tied_grad_bytes = ds_bf16 ? 4 : grad_bytes;
  const double accumulate =
      stack.fused_grad_accumulation && pc.zero != 3
          ? 0.0
          : grad_bytes_per_param * params_per_layer / (hw.memory_bw * hw.membound_efficiency) + hw.launch_overhead_s;
  layer = {};
  for (int i = 0; i < kLayerModules; ++i) {
    ModuleCosts& mc = modules[i];
    mc.weights = weights[i];
    mc.biases = biases[i];
    bw[i].c.membound += accumulate * (weights[i] + biases[i]) / params_per_layer;
    mc.forward_pre = fwd_pre[i].c;
    mc.recompute_pre = rc_pre[i].c;
    mc.backward_pre = bw_pre[i].c;
    mc.forward = fwd_pre[i].c;
    mc.forward += fwd[i].c;
    mc.recompute = rc_pre[i].c;
    mc.recompute += rc[i].c;
    mc.backward = bw_pre[i].c;
    mc.backward += bw[i].c;
    layer.forward += mc.forward;
    layer.recompute += mc.recompute;
    layer.backward += mc.backward;
  }

  // ---- embedding (first stage) and output layer (last stage) ----
  params_embedding = vt * h;
  params_position = llama ? 0 : s * h;  // llama: rotary, no position table
  Pass ef{*this, {}, t, per_node};
  ef.mem((llama ? 2 : 3) * E * bsh);  // word-embedding gather (gpt: + position embedding add)
  if (t > 1) ef.tp(sp ? ef.reduce_scatter(E * bsh) : ef.allreduce(E * bsh));  // vocab-parallel embedding
  if (!llama) ef.mem((2 * E + 1) * bsh * rowshare);  // embedding dropout
  edges.embed_forward = ef.c;
  Pass eb{*this, {}, t, per_node};
  if (!llama) eb.mem((2 * E + 1) * bsh * rowshare);  // dropout backward
  if (sp) eb.tp(eb.allgather(E * bsh));  // the gradient of the reduce-scatter
  eb.mem(E * params_embedding);  // dense embedding gradient: zero-fill
  eb.mem(3 * E * bsh);           // scatter-add of the rows
  eb.mem(grad_bytes_per_param * (params_embedding + params_position));  // into main_grad
  edges.embed_backward = eb.c;

  const double logits = rows * vt;
  Pass hf{*this, {}, t, per_node};
  hf.mem(2 * E * bsh * rowshare);  // final LayerNorm
  column_forward(hf, vt);          // logits (sequence parallel: after an all-gather)
  hf.mem((E + 4) * logits);      // to fp32
  hf.mem(4 * logits);            // max
  hf.mem(8 * logits);            // subtract
  hf.mem(8 * logits);            // exp
  hf.mem(4 * logits);            // sum
  hf.mem(8 * logits);            // normalise (kept for backward)
  for (int i = 0; i < 3; ++i) hf.tp(hf.allreduce(4 * rows));  // max, target logit, sum: three small all-reduces
  edges.head_forward = hf.c;
  Pass hb{*this, {}, t, per_node};
  hb.mem(8 * logits);            // softmax - one-hot
  hb.mem((4 + E) * logits);      // scale, back to fp16
  column_backward(hb, vt);       // logits, f
  hb.mem(grad_bytes_per_param * params_embedding);  // output-weight gradient into main_grad
  hb.mem(4 * E * bsh * rowshare);  // final LayerNorm backward
  edges.head_backward = hb.c;

  // ---- pipeline sends: b*s*h activations; scatter/gather sends 1/t per rank, then an NVLink all-gather
  act_bytes = E * bsh;
  // Sequence parallelism sends each rank's own rows: nothing to gather after.
  // DeepSpeed partitions every pipeline tensor over the tensor-parallel group whenever t > 1
  // (PipelineEngine: is_pipe_partitioned = is_grad_partitioned = is_model_parallel), whatever
  // --scatter-gather says.
  const bool sg = (pc.scatter_gather || stack.deepspeed_engine) && t > 1 && !sp;
  send_bytes = sg || sp ? act_bytes / t : act_bytes;
  send_cross = net.p2p(send_bytes, true);
  send_local = net.p2p(send_bytes, false);
  gather = sg ? net.allgather(act_bytes, t, per_node) + hw.launch_overhead_s : 0.0;
  if (stack.deepspeed_engine) {
    // A host sync (torch.cuda.synchronize, or .tolist() of a device tensor) empties the GPU's
    // queue: the GPU then idles while the host launches the next kernel.
    host_sync = hw.launch_overhead_s;
    // A partitioned tensor goes as two blocking sends: its meta (a few int64s), then the shard.
    if (sg) {
      meta_cross = net.p2p(64, true);
      meta_local = net.p2p(64, false);
    }
  }

  // Adam on fp32 master weights, per parameter: copy the fp16 gradient to fp32 (2+4), unscale and
  // check for inf (4+4), norm (4), Adam (grad, param, m, v read; param, m, v written: 28), copy
  // the master to fp16 (4+2), zero the gradient buffer (2). f32 training: no copies (4+28+4).
  optimizer_bytes_per_param = cfg.precision == Precision::F32 ? 4 + 4 + 28 + 4 : 6 + 8 + 4 + 28 + 6 + grad_bytes;
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

namespace {
// Data-parallel peers of a rank are t ranks apart: gpus_per_node / t of them share its node.
int dp_peers_per_node(const ParallelConfig& p, const HardwareProfile& hw) {
  return p.tp >= hw.gpus_per_node ? 1 : std::min(p.dp, hw.gpus_per_node / p.tp);
}

// The data-parallel group of each GPU of node 0 (Megatron's rank order: tensor, data, then
// pipeline ranks; rank r is in group (r mod t, r / (t d))), -1 past the last rank.
std::vector<int> dp_groups_of_node(const ParallelConfig& p, const HardwareProfile& hw) {
  std::vector<int> group_of(size_t(hw.gpus_per_node), -1);
  const long long ranks = 1LL * p.tp * p.dp * p.pp;
  for (int l = 0; l < hw.gpus_per_node && l < ranks; ++l)
    group_of[size_t(l)] = int(l % p.tp + p.tp * (l / (1LL * p.tp * p.dp)));
  return group_of;
}
}  // namespace

// Under NCCL 2.8's NIC choice every data-parallel group of the node runs its collective at once
// (network.h); time the group of rank 0.
bool CostModel::shared_nics() const { return stack.nccl_first_nic_per_switch && hw.pcie_switches > 0; }

double CostModel::dp_allreduce(double params) const {
  if (cfg.par.dp <= 1) return 0;
  if (shared_nics()) return net.allreduce_nccl28(params * grad_bytes, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.allreduce(params * grad_bytes, cfg.par.dp, dp_peers_per_node(cfg.par, hw));
}

double CostModel::dp_reduce_scatter(double params) const {
  if (cfg.par.dp <= 1) return 0;
  if (shared_nics()) return net.allgather_nccl28(params * grad_bytes, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.reduce_scatter(params * grad_bytes, cfg.par.dp, dp_peers_per_node(cfg.par, hw));
}

double CostModel::dp_allgather(double params) const {
  if (cfg.par.dp <= 1) return 0;
  if (shared_nics()) return net.allgather_nccl28(params * elem, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.allgather(params * elem, cfg.par.dp, dp_peers_per_node(cfg.par, hw));
}

double CostModel::dp_reduction(double params) const {
  if (cfg.par.dp <= 1) return 0;
  if (!stack.deepspeed_engine) return cfg.par.zero == 1 ? dp_reduce_scatter(params) : dp_allreduce(params);
  // DeepSpeed: bucketed all-reduces after the last micro-batch, also under ZeRO-1 with a pipeline
  // (reduce_gradients -> buffered_reduce_fallback) and under BF16_Optimizer, which casts its fp32
  // buffer to bf16 for the wire and back (read 4 write 2, read 2 write 4).
  const double casts = bf16_optimizer(stack, cfg.precision)
                           ? 12 * params / (hw.memory_bw * hw.membound_efficiency) + 2 * hw.launch_overhead_s
                           : 0.0;
  return dp_allreduce(params) + casts;
}

int param_tensors_per_layer(const ModelConfig& mc) { return mc.arch == Arch::Llama ? 6 : 12; }

double layer_params_per_device(const ModelConfig& mc, int t) {
  // qkv h (h + 2 g h/a) (3h^2 without query groups), proj h^2, the MLP; gpt: 12h^2/t + 7h/t + 6h
  // with f = 4h and multi-head attention.
  const double h = mc.hidden, f = mc.ffn_hidden(), qkv = double(mc.qkv_width());
  if (mc.arch == Arch::Llama) return (h * qkv + h * h + 3 * h * f) / t + 2 * h;
  return (h * qkv + h * h + 2 * h * f) / t + (qkv + f) / t + 6.0 * h;
}

double CostModel::embedding_allreduce() const {
  // llama's output layer is not tied to the embedding: nothing to sum across stages.
  if (cfg.par.pp <= 1 || !cfg.model.tied_embedding()) return 0;
  const bool cross = cross_node(0, cfg.par.pp - 1);
  return net.allreduce(params_embedding * tied_grad_bytes, 2, cross ? 1 : 2);
}

double CostModel::optimizer_step(double params) const {
  return params * optimizer_bytes_per_param / (hw.memory_bw * hw.membound_efficiency) + 20 * hw.launch_overhead_s;
}

double CostModel::model_parallel_sync() const {
  const int mp = cfg.par.tp * cfg.par.pp;
  if (mp <= 1) return 0;
  const bool cross = mp > hw.gpus_per_node;
  // Two all-reduces of one number (found-inf, grad norm): latency only.
  double sync = 2 * net.allreduce(4, mp, cross ? std::min(cfg.par.tp, hw.gpus_per_node) : mp);
  // DeepSpeed's _aggregate_total_loss: the loss all-reduced over the data-parallel group, then
  // broadcast from the last stage to the pipeline's others (a ring of p over nodes).
  if (stack.deepspeed_engine)
    sync += net.allreduce(4, cfg.par.dp, dp_peers_per_node(cfg.par, hw)) + net.allreduce(4, cfg.par.pp, 1) / 2;
  return sync;
}

}  // namespace ptdp::sim
