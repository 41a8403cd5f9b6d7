#include "core/accounting/memory_estimate.h"

#include <unistd.h>

#include "core/common/error.h"
#include "core/model/tensor_inventory.h"

namespace ptdp {

MemoryEstimate estimate_single_rank_f32(const ModelConfig& c, int micro_batch, Recompute mode) {
  // In double: the products of large sizes leave int64 (12 h^2 l x 16 bytes, b s (a s) l, ...);
  // below kMaxEstimateBytes every term is an integer under 2^53, so the result is exact.
  const double h = c.hidden, s = c.seq_length, a = c.heads, l = c.layers, vp = double(c.padded_vocab(1));
  const double tokens = double(micro_batch) * s;
  // The model's tensors with the padded vocabulary (int64 holds them for every size validate_model
  // allows: at most about 2^60).
  const double params = double(model_tensors(c, c.padded_vocab(1)).total());
  const double qkv = double(c.qkv_width());
  // Kept per token and layer: input, ln1, qkv (3h; h + 2g h/a with g query groups), attention
  // output, x2, ln2, fc and GeLU (4h each): 16h values; plus the attention probabilities, a*s per token.
  const double kept = 13 * h + qkv;
  double per_layer = kept + a * s;
  if (mode == Recompute::Full) per_layer = h;
  if (mode == Recompute::Selective) per_layer = kept;
  const double state = 16 * params;
  // Layers, plus logits and their gradient, plus one layer's working set during backward.
  const double activations = 4 * tokens * (l * per_layer + 2 * vp + kept + a * s);
  if (!(state + activations <= double(kMaxEstimateBytes)))
    usage_error("--model {} (l={} h={} s={}) with --micro-batch {} needs about {:.4g} GB for one model replica "
                "in f32, more than the {:.0f} GB one replica may use",
                c.name, c.layers, c.hidden, c.seq_length, micro_batch, (state + activations) / 1e9,
                double(kMaxEstimateBytes) / 1e9);
  return {static_cast<int64_t>(state), static_cast<int64_t>(activations)};
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? int64_t(pages) * size : 0;
}

}  // namespace ptdp
