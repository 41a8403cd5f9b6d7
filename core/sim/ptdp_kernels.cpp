// ptdp's own transformer layer as its CUDA backend runs it (--stack ptdp; core/model/layer.cpp,
// llama_layer.cpp, core/backend/cuda/cuda_backend.cpp): each Backend op one call, its kernels in
// the op's order, each op's bytes as its op profile counts them (op_profile.h; the column-sum
// partials of the norms' backward left out). No dropout; biases in the GEMM epilogue; GeLU in fc's
// GEMM epilogue and its gradient in fc2's dgrad GEMM (cuBLASLt GELU_AUX_BIAS, DGELU) where the MLP
// width on the device is a multiple of 8 (else their own kernels); residual adds their own
// kernels; the attention core unfused (the default: --attention-backend auto and unfused): the heads
// permuted to [b a, s, 3 hd], Q K^T, the causal softmax in place (it reads the scores on and below
// the diagonal and writes whole rows), P V, the heads permuted back; or cuDNN's fused attention
// (--attention-backend cudnn). Collectives block, beside no GEMM.
#include <cmath>

#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

namespace {

// Y[rows, n] = X W^T: one cuBLASLt GEMM, the bias in its epilogue. Column-parallel: sequence
// parallelism gathers X first; row-parallel: the partial Y summed over the group after.
void linear_forward(KernelBuilder& x, const LayerShape& d, const char* name, double n, double k, bool column) {
  if (column && d.sp) x.collective(name, Collective::AllGather, d.E * d.bsh);
  x.run_in("linear_forward").gemm(name, d.rows, n, k);
  if (!column && d.t > 1)
    x.collective(name, d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh);
}

// dX = dY W, dW += dY^T X (into the f32 gradient: no accumulation pass), db += column sums of dY.
// Column-parallel: X gathered again first, dX summed over the group after; row-parallel: dY gathered first.
void linear_backward(KernelBuilder& x, const LayerShape& d, const char* name, double n, double k, bool column) {
  if (d.sp) x.collective(name, Collective::AllGather, d.E * d.bsh, Overlap::None, -1, column ? "input again" : "output grad");
  x.run_in("linear_backward");
  x.gemm(name, d.rows, k, n, "dgrad");
  x.gemm(name, k, n, d.rows, "wgrad");
  if (!d.llama) x.membound("bias grad", d.E * d.rows * n + 8 * n);
  if (column && d.t > 1)
    x.collective(name, d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh, Overlap::None, -1, "dgrad");
}

// Whether the CUDA backend runs GeLU in the GEMM epilogues (cuBLASLt's AUX_LD: a multiple of 8).
bool gelu_in_epilogue(const LayerShape& d) { return !d.llama && std::fmod(d.ft, 8.0) == 0; }

// fc2's backward with fc's GeLU gradient in the dgrad GEMM's epilogue (linear_gelu_backward):
// linear_backward's wgrad and bias gradient, then the dgrad GEMM, its own op.
void linear_gelu_backward(KernelBuilder& x, const LayerShape& d) {
  if (d.sp) x.collective("fc2", Collective::AllGather, d.E * d.bsh, Overlap::None, -1, "output grad");
  x.run_in("linear_backward").gemm("fc2", d.ft, d.h, d.rows, "wgrad");
  x.membound("bias grad", d.E * d.rows * d.h + 8 * d.h);
  x.run_in("linear_gelu_backward").gemm("fc2", d.rows, d.ft, d.h, "dgrad");
}

// LayerNorm (llama: RMSNorm) of this rank's rows, with its f32 statistics.
void norm_forward(KernelBuilder& x, const LayerShape& d, const char* name) {
  const double n = d.rows * d.rowshare, c = d.h;
  if (d.llama) x.run_in("rmsnorm_forward").membound(name, d.E * (2 * n * c + c) + 4 * n);
  else x.run_in("layernorm_forward").membound(name, d.E * (2 * n * c + 2 * c) + 8 * n);
}
// The norm's backward, which writes dx as the residual stream's gradient plus its own (it reads
// the residual gradient where it would read dx to accumulate: the bytes of an accumulation).
void norm_backward(KernelBuilder& x, const LayerShape& d, const char* name) {
  const double n = d.rows * d.rowshare, c = d.h;
  if (d.llama) x.run_in("rmsnorm_backward").membound(name, d.E * (4 * n * c + c) + 4 * n + 8 * c);
  else x.run_in("layernorm_backward").membound(name, d.E * (3 * n * c + c) + 8 * n + 16 * c);
}
// The attention's residual add and ln2 in one pass (add_layernorm_forward, add_rmsnorm_forward):
// x and the residual read, their sum and the norm's output written.
void residual_norm_forward(KernelBuilder& x, const LayerShape& d, const char* name) {
  const double n = d.rows * d.rowshare, c = d.h;
  if (d.llama) x.run_in("add_rmsnorm_forward").membound(name, d.E * (4 * n * c + c) + 4 * n);
  else x.run_in("add_layernorm_forward").membound(name, d.E * (4 * n * c + 2 * c) + 8 * n);
}
// The MLP's activation in its own pass (gelu_forward: fc's output read, the activation written;
// swiglu_forward reads gate and up): in forward where no epilogue takes it, and again at the start
// of backward with --recompute-activation.
void activation_forward(KernelBuilder& x, const LayerShape& d, bool again) {
  if (d.llama) x.run_in("swiglu_forward").membound(again ? "swiglu again" : "swiglu", 3 * d.E * d.rows * d.ft);
  else x.run_in("gelu_forward").membound(again ? "gelu again" : "gelu", 2 * d.E * d.rows * d.ft);
}
void residual(KernelBuilder& x, const LayerShape& d) {
  x.run_in("add_").membound("residual", 3 * d.E * d.rows * d.rowshare * d.h);
}

// The per-head q | k | v attention reads: with grouped-query attention the keys and values
// expanded to every head, then (llama) rotated; llama without it rotates the kept qkv in place.
void attention_input(KernelBuilder& x, const LayerShape& d) {
  const double heads3 = 3 * d.ht;  // [rows, 3 a/t hd]
  if (d.gqa) x.run_in("gqa_expand").membound("expand k v", d.E * d.rows * (4 * d.ht + d.kvt));
  if (d.llama && d.gqa) x.run_in("rope").membound("rotary q k", 2 * d.E * d.rows * heads3 + 4 * d.s * d.hd);
}

void attention_forward(KernelBuilder& x, const LayerShape& d) {
  const double s = d.s, hd = d.hd, nh = d.rows * d.ht;
  attention_input(x, d);
  x.run_in("attention_forward");
  x.membound("permute heads in", 6 * d.E * nh);
  x.attention("q k^T", s, s, hd, d.b * d.at);
  x.membound("causal softmax", 1.5 * d.E * d.scores);
  x.attention("p v", s, hd, s, d.b * d.at);
  x.membound("permute heads out", 2 * d.E * nh);
}

void attention_backward(KernelBuilder& x, const LayerShape& d) {
  const double s = d.s, hd = d.hd, nh = d.rows * d.ht;
  attention_input(x, d);
  x.run_in("attention_backward");
  x.membound("permute q k v in", 6 * d.E * nh);
  x.membound("permute dy in", 2 * d.E * nh);
  x.attention("dP = dY V^T", s, s, hd, d.b * d.at);
  x.attention("dV = P^T dY", s, hd, s, d.b * d.at);
  x.membound("causal softmax backward", 2 * d.E * d.scores);
  x.attention("dQ = dS K", s, hd, s, d.b * d.at);
  x.attention("dK = dS^T Q", s, hd, s, d.b * d.at);
  x.membound("permute dq dk dv out", 6 * d.E * nh);
  if (d.llama) x.run_in("rope").membound("rotary backward", 2 * d.E * d.rows * 3 * d.ht + 4 * d.s * d.hd);
  if (d.gqa) x.run_in("gqa_reduce").membound("sum k v gradients", d.E * d.rows * (4 * d.ht + d.kvt));
}

// --attention-backend cudnn (core/model/block_attention_path.cpp, cp_attention_forward at c = 1):
// q, k and v split from the fused projection (llama's q and k then rotated at their positions),
// cuDNN's fused attention (sdpa: the scores on chip, the groups read in place, the products over
// the causal half, as --stack mcore's, whose Transformer Engine runs the same cuDNN engines:
// layer_kernels.cpp), its output written in [rows, heads] as the projection reads it.
void rope_rows(KernelBuilder& x, const LayerShape& d, const char* name) {
  x.run_in("rope_rows").membound(name, 2 * d.E * d.rows * (d.ht + d.kvt / 2) + 2 * 4 * d.rows, 2);  // q, then k
}
void cudnn_core_forward(KernelBuilder& x, const LayerShape& d) {
  x.run_in("cudnn_attention_forward");
  x.attention("q k^T (cuDNN)", d.s, d.s, d.hd, d.b * d.at / 2);
  x.attention("p v (cuDNN)", d.s, d.hd, d.s, d.b * d.at / 2);
}
void cudnn_forward(KernelBuilder& x, const LayerShape& d) {
  x.run_in("qkv_split").membound("split q k v", 2 * d.E * d.rows * d.qkvt);
  if (d.llama) rope_rows(x, d, "rotary q k");
  cudnn_core_forward(x, d);
}
// cuDNN's five products over the causal half (S again, dP, dV, dK, dQ; deterministic), writing dq,
// dk and dv itself (a block alone: flash_attention_backward's accumulate false), llama's rotation
// undone, and the three joined into the fused projection's gradient.
void cudnn_backward(KernelBuilder& x, const LayerShape& d) {
  const double grads = d.E * d.rows * d.qkvt;  // dq | dk | dv
  x.run_in("cudnn_attention_backward");
  for (const char* name : {"q k^T again (cuDNN)", "dP = dY V^T (cuDNN)"}) x.attention(name, d.s, d.s, d.hd, d.b * d.at / 2);
  for (const char* name : {"dV = P^T dY (cuDNN)", "dQ = dS K (cuDNN)", "dK = dS^T Q (cuDNN)"})
    x.attention(name, d.s, d.hd, d.s, d.b * d.at / 2);
  if (d.llama) rope_rows(x, d, "rotary backward");
  x.run_in("qkv_join").membound("join dq dk dv", 2 * grads);
}

}  // namespace

void ptdp_layer_forward(KernelBuilder& x, const LayerShape& d, bool core_only) {
  if (core_only) {
    if (d.cudnn) cudnn_core_forward(x.in(kModuleQkv), d);
    else attention_forward(x.in(kModuleQkv), d);
    return;
  }
  norm_forward(x.in(kModuleQkv, true), d, "ln1");
  x.in(kModuleQkv);
  linear_forward(x, d, "qkv", d.qkvt, d.h, true);
  if (d.cudnn) {
    cudnn_forward(x, d);
  } else {
    if (d.llama && !d.gqa) x.run_in("rope").membound("rotary q k", 2 * d.E * d.rows * d.qkvt + 4 * d.s * d.hd);
    attention_forward(x, d);
  }
  x.in(kModuleProj);
  linear_forward(x, d, "proj", d.h, d.ht, false);
  residual_norm_forward(x, d, "ln2");
  x.in(kModuleFc);
  if (gelu_in_epilogue(d)) {
    if (d.sp) x.collective("fc", Collective::AllGather, d.E * d.bsh);
    x.run_in("linear_gelu_forward").gemm("fc", d.rows, d.fc_out, d.h);
  } else {
    linear_forward(x, d, "fc", d.fc_out, d.h, true);
    activation_forward(x, d, false);
  }
  x.in(kModuleFc2);
  linear_forward(x, d, "fc2", d.h, d.ft, false);
  residual(x, d);
}

void ptdp_layer_backward(KernelBuilder& x, const LayerShape& d) {
  // --recompute-activation: act from the kept fc (layer.cpp recompute_activation)
  if (d.recompute_act) activation_forward(x.in(kModuleFc), d, true);
  x.in(kModuleFc2);
  if (gelu_in_epilogue(d)) {
    linear_gelu_backward(x, d);
    x.in(kModuleFc);
  } else {
    linear_backward(x, d, "fc2", d.h, d.ft, false);
    x.in(kModuleFc);
    if (d.llama) x.run_in("swiglu_backward").membound("swiglu backward", 5 * d.E * d.rows * d.ft);
    else x.run_in("gelu_backward").membound("gelu backward", 3 * d.E * d.rows * d.ft);
  }
  linear_backward(x, d, "fc", d.fc_out, d.h, true);
  norm_backward(x.in(kModuleProj, true), d, "ln2 backward");
  x.in(kModuleProj);
  linear_backward(x, d, "proj", d.h, d.ht, false);
  if (d.cudnn) cudnn_backward(x.in(kModuleQkv, true), d);
  else attention_backward(x.in(kModuleQkv, true), d);
  x.in(kModuleQkv);
  linear_backward(x, d, "qkv", d.qkvt, d.h, true);
  norm_backward(x, d, "ln1 backward");
}

}  // namespace ptdp::sim
