// Loss scaling for f16 training, as Megatron's DynamicGradScaler: the loss gradient is
// multiplied by the scale so small gradients survive f16, and the gradients are divided by it
// before the update. A step whose gradients overflowed is skipped; after `hysteresis` such
// steps in a row the scale halves (not below min_scale); after `window` clean steps it doubles.
// Without dynamic scaling the scale stays at its initial value (1 for f32 and bf16).
#pragma once
#include <cstdint>

namespace ptdp {

struct LossScaleConfig {
  bool dynamic = false;
  double initial = 1.0;  // Megatron's f16 default: 2^32
  double min_scale = 1.0;
  int64_t window = 1000;
  int64_t hysteresis = 2;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& cfg = {});
  double scale() const { return scale_; }
  bool dynamic() const { return cfg_.dynamic; }
  // After the gradients of a step are known: returns true when the step must be skipped
  // (dynamic scaling and non-finite gradients), updating the scale.
  bool update(bool found_nonfinite);

  // State for checkpoints.
  struct State {
    double scale = 1.0;
    int64_t growth = 0;      // clean steps since the last change
    int64_t hysteresis = 0;  // overflows still tolerated before the scale halves
  };
  State state() const { return {scale_, growth_, hysteresis_left_}; }
  void restore(const State& s);

 private:
  LossScaleConfig cfg_;
  double scale_;
  int64_t growth_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace ptdp
