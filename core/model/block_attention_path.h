// The attention of a layer as block attention (--attention-backend flash, or context
// parallelism): the fused QKV projection split into q, k and v (Backend::qkv_split; grouped-query
// attention needs no expansion), for LLaMA q and k rotated at their tokens' positions
// (Backend::rope_rows: a context-parallel rank's rows are two chunks of each sequence), then
// cp_attention_forward over the context-parallel group (one rank: flash attention alone), which
// keeps the output and its log-sum-exp instead of the [s, s] probabilities. Backward is the
// transpose; selective recomputation reruns the attention core from the kept q, k and v.
#pragma once
#include "core/model/layer.h"

namespace ptdp {

// From c.qkv (the projection, just computed): c.q, c.k, c.v (rotated for LLaMA), c.attn and the
// attention output c.atty [rows, heads hd]. c.qkv is released (q, k and v hold its values).
void block_attention_forward(Backend& be, const LayerDims& d, LayerCache& c);
// Selective recomputation: drops what the attention core rebuilds (c.atty, c.attn) after forward.
void block_attention_drop_core(LayerCache& c);
// ... and rebuilds it in backward from the kept c.q, c.k, c.v.
void block_attention_recompute(Backend& be, const LayerDims& d, LayerCache& c);
// The gradient of the projection's output qkv [rows, qkv_cols] from that of the attention output.
Tensor block_attention_backward(Backend& be, const LayerDims& d, const LayerCache& c, const Tensor& datty);

}  // namespace ptdp
