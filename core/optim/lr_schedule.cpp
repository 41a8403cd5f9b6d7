#include "core/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ptdp {

double LrSchedule::warmup() const {
  return warmup_fraction > 0 ? warmup_fraction * double(decay_iters) : double(warmup_iters);
}

// Megatron-core's OptimizerParamScheduler.get_lr, with num_steps = steps_done x batch samples.
double LrSchedule::at(int64_t n) const {
  const double steps = double(n * batch);
  const double warm = warmup_fraction > 0 ? warmup_fraction * double(decay_iters * batch) : double(warmup_iters * batch);
  if (warm > 0 && steps <= warm) return max_lr * steps / warm;
  if (style == LrDecayStyle::Constant || decay_iters == 0) return max_lr;
  const double decay = double(decay_iters * batch);
  if (steps > decay) return min_lr;
  if (style == LrDecayStyle::InverseSquareRoot)
    return std::max(min_lr, max_lr * std::pow(std::max(warm, 1.0), 0.5) / std::pow(std::max(steps, 1.0), 0.5));
  if (decay <= warm) return max_lr;  // ptdp's rule when the decay ends within the warm-up (validation refuses it)
  const double ratio = (steps - warm) / (decay - warm);
  double coeff = 1.0;
  switch (style) {
    case LrDecayStyle::Linear: coeff = 1.0 - ratio; break;
    case LrDecayStyle::Cosine: coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0); break;
    case LrDecayStyle::Wsd: {
      const double wsd = double(wsd_decay_iters * batch), anneal_start = decay - wsd;
      if (steps <= anneal_start) break;
      const double r = (steps - anneal_start) / wsd;
      switch (wsd_style) {
        case WsdDecayStyle::Linear: coeff = 1.0 - r; break;
        case WsdDecayStyle::Cosine: coeff = 0.5 * (std::cos(M_PI * r) + 1.0); break;
        case WsdDecayStyle::Exponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
        case WsdDecayStyle::MinusSqrt: coeff = 1.0 - std::sqrt(r); break;
      }
      break;
    }
    default: break;
  }
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace ptdp
