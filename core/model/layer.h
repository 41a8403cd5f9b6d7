// One pre-LayerNorm transformer layer (fused QKV, causal attention, 4h GeLU MLP, residuals):
// forward keeping what backward needs, hand-written backward, and the recomputation modes.
// Tensor-parallel as Megatron: QKV and fc column-parallel, proj and fc2 row-parallel, so a
// layer all-reduces twice in forward (after proj and fc2, the g operator) and twice in
// backward (the input gradients of QKV and fc, the f operator).
#pragma once
#include <string>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/model/params.h"

namespace ptdp {

enum class Recompute { None, Full, Selective };
Recompute parse_recompute(const std::string& s);  // throws UsageError naming --recompute
const char* recompute_name(Recompute r);

struct LayerDims {
  int b = 0, s = 0;   // micro-batch and sequence length: rows = b * s
  int h = 0;          // hidden size
  int heads = 0;      // heads on this rank
  int hd = 0;         // head dimension
  int ffn = 0;        // MLP width on this rank
  double eps = 1e-5;  // LayerNorm (RMSNorm) epsilon
  bool llama = false;       // the LLaMA layer (llama_layer.h)
  double rope_theta = 1e4;  // llama: rotary base
  // Tensor parallelism: the group (null when t = 1) and whether this rank adds the biases of
  // the row-parallel layers (one rank only, before the all-reduce sums the partial outputs).
  Communicator* tp = nullptr;
  bool bias_owner = true;
  int64_t rows() const { return int64_t(b) * s; }
};

// Sums x over the tensor-parallel group (nothing when t = 1).
void tp_all_reduce(const LayerDims& d, Tensor& x);

// Views of one layer's tensors inside a flat parameter (or gradient) buffer.
// LLaMA: no biases (undefined tensors); fc_w is gate and up as one [2f, h] matrix, fc2_w down.
struct LayerWeights {
  Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  // Views of layer `layer` in flat, whose first element is element `base` of the layout.
  static LayerWeights view(const Tensor& flat, const ParamLayout& layout, int layer, int64_t base = 0);
};

// What the forward pass of one layer keeps for its backward pass. With full recomputation only
// x is kept; with selective recomputation everything but the attention probabilities. LLaMA:
// ln1/ln2 are the RMSNorm outputs (no means), qkv is after the rotary embedding, fc is gate | up.
struct LayerCache {
  Tensor x, ln1, mean1, rstd1, qkv, probs, atty, x2, ln2, mean2, rstd2, fc, act;
  int64_t bytes() const;
};

void layer_forward(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                   LayerCache& cache, Recompute mode);
// dx = d(loss)/dx from dy = d(loss)/dy; parameter gradients accumulate into g.
void layer_backward(Backend& be, const LayerDims& d, const LayerWeights& w, LayerWeights& g,
                    LayerCache& cache, const Tensor& dy, Tensor& dx, Recompute mode);

// The LLaMA layer (core/model/llama_layer.cpp): RMSNorm, QKV, rotary embedding of q and k,
// causal attention, proj, residual; RMSNorm, gate|up, SwiGLU, down, residual. No biases; the
// same tensor-parallel split and all-reduces as the GPT layer.
void llama_forward_all(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                       LayerCache& c);
void llama_backward(Backend& be, const LayerDims& d, const LayerWeights& w, LayerWeights& g, LayerCache& c,
                    const Tensor& dy, Tensor& dx);

}  // namespace ptdp
