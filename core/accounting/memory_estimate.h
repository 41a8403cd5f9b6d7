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

// The most one model replica may need (4 TiB): more than any machine this trains on has, and
// small enough that a caller may multiply the estimate by the rank count (at most 2^20) in int64.
inline constexpr int64_t kMaxEstimateBytes = int64_t(1) << 42;

// Computed without overflow for any sizes; UsageError naming --model and --micro-batch when the
// total is above kMaxEstimateBytes.
MemoryEstimate estimate_single_rank_f32(const ModelConfig& c, int micro_batch, Recompute mode);
int64_t physical_memory_bytes();

}  // namespace ptdp
