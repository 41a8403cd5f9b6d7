// Memory of ptdp's own executor (--stack ptdp): the tensors core/model/layer.cpp and
// llama_layer.cpp keep for the backward pass, the backward's peak, the loss head's, the state.
#pragma once
#include "core/config/run_config.h"
#include "core/sim/precision_knobs.h"

namespace ptdp::sim {

// Bytes one layer keeps for its backward per micro-batch (LayerCache::bytes): x, the norms'
// outputs and f32 statistics, qkv, the attention output, x2, the MLP's input and activation
// (llama: gate|up and SwiGLU's output; the latter not with --recompute-activation), and without
// recomputation the s x s probabilities.
double ptdp_layer_kept_bytes(const RunConfig& cfg, Recompute mode);

// Bytes the layer's backward adds to what it kept, at the larger of its two peaks. Whatever the
// mode (or --recompute-activation) dropped is recomputed first, so the backward holds the whole
// cache. The MLP's backward: the cache, dact (llama: and dfc), the incoming dy and outgoing dx.
// The attention's backward: the MLP's tensors released (fc, act, ln2, x2), dln, dx2, datty,
// dheads, dy, dx and the op's own buffers (q|k|v and dq|dk|dv permuted per head, dY permuted,
// the s x s dP). --attention-backend cudnn: q, k, v, y and its lse kept instead of qkv, y and
// the probabilities; cuDNN's workspace.
double ptdp_backward_peak_bytes(const RunConfig& cfg, Recompute mode);

// The loss head's peak on the last stage (gpt.cpp): the logits, their gradient written over them
// in the activation dtype, beside the final norm's output and its gradient.
double ptdp_head_peak_bytes(const RunConfig& cfg);

// Bytes of state per parameter (GptModel, AdamW): the weight in the run's dtype, its f32
// gradient (kept for the run's life), the master weight (mixed precision; the weight itself in
// f32) and Adam's two moments, in the optimizer's dtypes (`knobs`; f32 unless the
// precision-aware optimizer says otherwise), over d ranks with --zero 1. Mixed, f32 state: 18.
double ptdp_state_bytes_per_param(const RunConfig& cfg, const PrecisionKnobs& knobs);

}  // namespace ptdp::sim
