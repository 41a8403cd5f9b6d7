#include "core/optim/loss_scaler.h"

#include <algorithm>

#include "core/common/error.h"

namespace ptdp {

LossScaler::LossScaler(const LossScaleConfig& cfg) : cfg_(cfg), scale_(cfg.initial), hysteresis_left_(cfg.hysteresis) {
  PTDP_CHECK(cfg.initial > 0 && cfg.min_scale > 0 && cfg.window > 0 && cfg.hysteresis > 0,
             "loss scaling needs a positive scale, minimum, window and hysteresis");
}

bool LossScaler::update(bool found_nonfinite) {
  if (!cfg_.dynamic) return false;
  if (found_nonfinite) {
    growth_ = 0;
    if (--hysteresis_left_ <= 0) scale_ = std::max(scale_ * 0.5, cfg_.min_scale);
    return true;
  }
  if (++growth_ == cfg_.window) {
    growth_ = 0;
    hysteresis_left_ = cfg_.hysteresis;
    scale_ *= 2.0;
  }
  return false;
}

void LossScaler::restore(const State& s) {
  PTDP_CHECK(s.scale > 0, "a checkpoint's loss scale must be positive, not {}", s.scale);
  scale_ = s.scale;
  growth_ = s.growth;
  hysteresis_left_ = s.hysteresis;
}

}  // namespace ptdp
