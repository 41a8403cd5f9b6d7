// One pre-LayerNorm transformer layer (fused QKV, causal attention, 4h GeLU MLP, residuals):
// forward keeping what backward needs, hand-written backward, and the recomputation modes.
// Tensor-parallel as Megatron: QKV and fc column-parallel, proj and fc2 row-parallel, so a
// layer all-reduces twice in forward (after proj and fc2, the g operator) and twice in
// backward (the input gradients of QKV and fc, the f operator).
//
// Sequence parallelism (LayerDims::sp, --sequence-parallel; Korthikanti et al. 2022, section
// 4.2.2): the layer's input and output, its LayerNorms and residual adds hold only this tensor-
// parallel rank's n/t rows: rows [r*n/t, (r+1)*n/t) of the n = b*s rows (row j*s + i is token i
// of sequence j). With b = 1 that is Megatron's split of the sequence; with b > 1 it is a split
// of the b*s rows taken as one sequence (Megatron splits s of its [s, b, h] layout instead): the
// same arithmetic, since every operation in these regions works row by row. The all-reduces
// become an all-gather of the LayerNorm output before QKV and fc (g-bar; reduce-scatter of the
// input gradient in backward) and a reduce-scatter of the proj and fc2 outputs (all-gather of
// their gradient in backward). The kept LayerNorm outputs are the local rows: backward gathers
// them again for the weight gradients of QKV and fc, as Megatron does. The LayerNorm weight and
// bias gradients are then partial sums over the local rows: the trainer sums them over the
// tensor-parallel group (Gpt::sum_sequence_parallel_grads). The row-parallel biases are still
// added by rank 0 alone before the reduce-scatter, so their gradients (from the gathered output
// gradient) are whole on every rank.
#pragma once
#include <string>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/common/enum_names.h"
#include "core/model/context_attention.h"
#include "core/model/params.h"

namespace ptdp {

enum class Recompute { None, Full, Selective };
template <>
struct EnumNames<Recompute> {
  static constexpr std::array values{std::pair{Recompute::None, std::string_view("none")},
                                     std::pair{Recompute::Full, std::string_view("full")},
                                     std::pair{Recompute::Selective, std::string_view("selective")}};
};

struct LayerDims {
  int b = 0, s = 0;   // micro-batch and sequence length: rows = b * s
  int h = 0;          // hidden size
  int heads = 0;      // heads on this rank
  int groups = 0;     // key/value heads (query groups) on this rank; 0: heads (multi-head attention)
  int hd = 0;         // head dimension
  int ffn = 0;        // MLP width on this rank
  double eps = 1e-5;  // LayerNorm (RMSNorm) epsilon
  bool llama = false;       // the LLaMA layer (llama_layer.h)
  double rope_theta = 1e4;  // llama: rotary base
  // Tensor parallelism: the group (null when t = 1) and whether this rank adds the biases of
  // the row-parallel layers (one rank only, before the all-reduce sums the partial outputs).
  Communicator* tp = nullptr;
  bool bias_owner = true;
  bool sp = false;  // sequence parallelism (needs tp; rows() % t == 0)
  // --recompute-activation: the MLP's activation output (act) is dropped after forward and
  // recomputed from fc in backward (with Recompute::Full nothing is kept anyway).
  bool recompute_act = false;
  // Block attention (block_attention_path.h): --attention-backend flash, or context parallelism
  // (cp.size > 1: this rank holds chunks cp.rank and 2 cp.size - 1 - cp.rank of each of the b
  // sequences, s / cp.size rows per sequence; s stays the whole sequence's length). LLaMA:
  // positions (i32 [rows()], the backend's device) are each row's position in its sequence.
  bool block = false;
  ContextParallel cp;
  Tensor positions;
  int64_t rows() const { return int64_t(b) * s / cp.size; }
  int kv_heads() const { return groups > 0 ? groups : heads; }
  bool gqa() const { return kv_heads() != heads; }
  // Columns of this rank's QKV projection: (heads + 2 kv_heads) * hd (3 heads hd without GQA).
  int64_t qkv_cols() const { return int64_t(heads + 2 * kv_heads()) * hd; }
  // Rows of the layer's input, output, LayerNorms and residuals on this rank: n/t with sp.
  int64_t local_rows() const { return sp ? rows() / tp->size() : rows(); }
};

// Sums x over the tensor-parallel group (nothing when t = 1).
void tp_all_reduce(const LayerDims& d, Tensor& x);
// Sequence parallelism's g-bar: the whole [n, cols] tensor from every rank's local rows
// (all-gather); without sp, `local` itself.
Tensor sp_gather(Backend& be, const LayerDims& d, const Tensor& local);
// Where a row-parallel GEMM writes its partial [n, cols] output that reduce_rows() then sums
// into `out`: `out` itself (all-reduced in place) or, with sp, a whole-row scratch
// reduce-scattered into the local rows `out`.
Tensor partial_rows(Backend& be, const LayerDims& d, const Tensor& out);
void reduce_rows(const LayerDims& d, const Tensor& partial, Tensor& out);

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
// Grouped-query attention (LayerDims::gqa): qkv is the compact projection (per group its query
// heads, its key, its value: (heads + 2 groups) hd columns), before the rotary embedding for
// LLaMA; attention reads it expanded to every head (attention_qkv), rebuilt in backward.
//
// Selective recomputation is Korthikanti et al.'s (2022, section 5): Q, K, V (qkv) and the
// attention output (atty) are kept; the attention core (QK^T, the causal softmax and the
// product with V) is recomputed in backward to rebuild the probabilities, its output going to
// scratch. ptdp has no dropout, so there is no softmax-dropout to recompute.
//
// Bytes kept per layer (GPT, one dtype of e bytes for activations and 4-byte statistics; b
// sequences of s tokens, hidden h, a heads, t tensor-parallel ranks; docs/TRAINING.md):
//   none:      e*sbh*(8 + 24/t) + e*a*s*s*b/t + 16*sb     (sp: e*sbh*32/t + e*a*s*s*b/t + 16*sb/t)
//   selective: e*sbh*(8 + 24/t) + 16*sb                   (sp: e*sbh*32/t + 16*sb/t)
//   full:      e*sbh                                       (sp: e*sbh/t)
// x, ln1, x2, ln2 are sbh each (n/t rows with sp), qkv 3sbh/t, atty sbh/t, fc and act 4sbh/t,
// probs a*s*s*b/t; mean and rstd of both LayerNorms one f32 per row. With g query groups qkv is
// sbh(1 + 2g/a)/t instead of 3sbh/t.
//
// Block attention (LayerDims::block; block_attention_path.h) keeps q, k, v (LLaMA: rotated) in
// place of qkv, the same bytes, and no probabilities: attn holds the output's log-sum-exp (one f32
// per row and head, 4*a*sb/t bytes; atty is its output; a2a also keeps the whole sequence's q, k, v
// and output of its a/c heads, the size of q, k, v and atty again). Selective recomputation drops atty and
// attn and reruns the attention core in backward:
//   none:      e*sbh*(8 + 24/t) + 4*a*sb/t + 16*sb     selective: e*sbh*(7 + 24/t) + 16*sb
// With context parallelism c, s is this rank's s/c tokens of each sequence in every formula.
struct LayerCache {
  Tensor x, ln1, mean1, rstd1, qkv, probs, atty, x2, ln2, mean2, rstd2, fc, act;
  Tensor q, k, v;    // block attention
  CpAttnCache attn;  // block attention: the output and its log-sum-exp
  int64_t bytes() const;
};

// The per-head q | k | v [n, 3 heads hd] that attention reads, from the kept qkv: qkv itself
// without grouped-query attention; with it the keys and values expanded to every head of their
// group (Backend::gqa_expand), then, for LLaMA, the rotary embedding applied.
Tensor attention_qkv(Backend& be, const LayerDims& d, const Tensor& qkv);
// The transpose for backward: from the per-head gradient dheads (after LLaMA's inverse rotation),
// the gradient of the kept qkv: dheads itself, or with grouped-query attention the keys' and
// values' gradients summed over each group (Backend::gqa_reduce).
Tensor qkv_grad(Backend& be, const LayerDims& d, const Tensor& dheads);

// The gradient of the kept qkv from that of the attention output: the unfused attention's
// backward (LLaMA: then the rotation's transpose) and qkv_grad, or the block attention's.
Tensor attention_grad(Backend& be, const LayerDims& d, const LayerCache& c, const Tensor& datty);

void layer_forward(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                   LayerCache& cache, Recompute mode);
// After the attention's backward: everything of the cache released but what the QKV projection's
// and the first norm's backward read (x, ln1 and its statistics).
void release_attention(LayerCache& c);
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
