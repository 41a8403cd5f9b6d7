#include "core/optim/lr_schedule.h"

#include <cmath>

namespace ptdp {

double LrSchedule::at(int64_t n) const {
  if (warmup_iters > 0 && n <= warmup_iters) return max_lr * double(n) / double(warmup_iters);
  if (decay_iters <= warmup_iters) return max_lr;
  if (n > decay_iters) return min_lr;
  double ratio = double(n - warmup_iters) / double(decay_iters - warmup_iters);
  double coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace ptdp
