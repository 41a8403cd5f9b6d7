#include "core/runtime/memory_estimate.h"

#include <unistd.h>

namespace ptdp {

MemoryEstimate estimate_single_rank_f32(const ModelConfig& c, int micro_batch, Recompute mode) {
  const int64_t h = c.hidden, s = c.seq_length, a = c.heads, l = c.layers, vp = c.padded_vocab(1);
  const int64_t tokens = int64_t(micro_batch) * s;
  const int64_t params = l * (12 * h * h + 13 * h) + (vp + s) * h + 2 * h;
  // Kept per token and layer: input, ln1, qkv (3h), attention output, x2, ln2, fc and GeLU
  // (4h each): 16h values; plus the attention probabilities, a*s per token.
  int64_t per_layer = 16 * h + a * s;
  if (mode == Recompute::Full) per_layer = h;
  if (mode == Recompute::Selective) per_layer = 16 * h;
  MemoryEstimate e;
  e.state_bytes = 16 * params;
  // Layers, plus logits and their gradient, plus one layer's working set during backward.
  e.activation_bytes = 4 * tokens * (l * per_layer + 2 * vp + 16 * h + a * s);
  return e;
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? int64_t(pages) * size : 0;
}

}  // namespace ptdp
