// Learning-rate schedule as Megatron's OptimizerParamScheduler: linear warm-up from 0, then cosine
// decay to min_lr, evaluated iteration by iteration exactly as Megatron does (see at()).
#pragma once
#include <cstdint>

namespace ptdp {

struct LrSchedule {
  double max_lr = 1e-3, min_lr = 0;
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;  // iteration at which min_lr is reached; 0: no decay after warm-up
  // Learning rate of the iteration that follows `steps_done` successful optimizer steps. Megatron
  // reads its scheduler before advancing it, so iteration 1 runs at at(0): 0 under warm-up.
  double at(int64_t steps_done) const;
};

}  // namespace ptdp
