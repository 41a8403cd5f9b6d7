// Learning-rate schedule as Megatron's: linear warm-up from 0, then cosine decay to min_lr.
#pragma once
#include <cstdint>

namespace ptdp {

struct LrSchedule {
  double max_lr = 1e-3, min_lr = 0;
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;  // iteration at which min_lr is reached; 0: no decay after warm-up
  // Learning rate for the step numbered `step` (1-based).
  double at(int64_t step) const;
};

}  // namespace ptdp
