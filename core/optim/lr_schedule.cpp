#include "core/optim/lr_schedule.h"

#include <cmath>

namespace ptdp {

double LrSchedule::at(int64_t step) const {
  if (warmup_iters > 0 && step <= warmup_iters) return max_lr * double(step) / double(warmup_iters);
  if (decay_iters <= warmup_iters) return max_lr;
  if (step >= decay_iters) return min_lr;
  double ratio = double(step - warmup_iters) / double(decay_iters - warmup_iters);
  double coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace ptdp
