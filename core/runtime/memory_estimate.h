// A first-order estimate of what one rank training the whole model in f32 needs, so that a run
// too big for the machine is refused at once instead of being killed mid-way.
#pragma once
#include <cstdint>

#include "core/model/config.h"
#include "core/model/layer.h"

namespace ptdp {

struct MemoryEstimate {
  int64_t state_bytes = 0;       // weights, gradients, Adam moments (f32: 16 bytes a parameter)
  int64_t activation_bytes = 0;  // one micro-batch's kept activations plus the logits
  int64_t total() const { return state_bytes + activation_bytes; }
};

MemoryEstimate estimate_single_rank_f32(const ModelConfig& c, int micro_batch, Recompute mode);
int64_t physical_memory_bytes();

}  // namespace ptdp
