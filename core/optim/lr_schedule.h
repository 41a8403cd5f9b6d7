// Learning-rate schedule as Megatron's OptimizerParamScheduler: linear warm-up from 0, then the
// decay style (constant, linear, cosine, inverse-square-root or WSD) to min_lr, evaluated
// iteration by iteration exactly as Megatron does, in samples (see at()).
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/common/enum_names.h"

namespace ptdp {

// Megatron's --lr-decay-style and --lr-wsd-decay-style.
enum class LrDecayStyle { Constant, Linear, Cosine, InverseSquareRoot, Wsd };
enum class WsdDecayStyle { Exponential, Linear, Cosine, MinusSqrt };

template <>
struct EnumNames<LrDecayStyle> {
  static constexpr std::array values{std::pair{LrDecayStyle::Constant, std::string_view("constant")},
                                     std::pair{LrDecayStyle::Linear, std::string_view("linear")},
                                     std::pair{LrDecayStyle::Cosine, std::string_view("cosine")},
                                     std::pair{LrDecayStyle::InverseSquareRoot, std::string_view("inverse-square-root")},
                                     std::pair{LrDecayStyle::Wsd, std::string_view("WSD")}};
};
template <>
struct EnumNames<WsdDecayStyle> {
  static constexpr std::array values{std::pair{WsdDecayStyle::Exponential, std::string_view("exponential")},
                                     std::pair{WsdDecayStyle::Linear, std::string_view("linear")},
                                     std::pair{WsdDecayStyle::Cosine, std::string_view("cosine")},
                                     std::pair{WsdDecayStyle::MinusSqrt, std::string_view("minus_sqrt")}};
};

struct LrSchedule {
  double max_lr = 1e-3, min_lr = 0;
  int64_t warmup_iters = 0;
  // --lr-warmup-fraction: the warm-up as this fraction of the decay (0: warmup_iters).
  double warmup_fraction = 0;
  int64_t decay_iters = 0;  // iteration at which min_lr is reached; 0: no decay after warm-up
  LrDecayStyle style = LrDecayStyle::Cosine;
  int64_t wsd_decay_iters = 0;  // WSD: the last iterations of the decay, annealed by wsd_style
  WsdDecayStyle wsd_style = WsdDecayStyle::Exponential;
  // Samples per iteration (the global batch): Megatron counts its steps in samples, so that
  // a fractional warm-up (--lr-warmup-fraction) ends where it ends in Megatron.
  int64_t batch = 1;
  // Learning rate of the iteration that follows `steps_done` successful optimizer steps. Megatron
  // reads its scheduler before advancing it, so iteration 1 runs at at(0): 0 under warm-up.
  double at(int64_t steps_done) const;
  // The warm-up in iterations (fractional with --lr-warmup-fraction).
  double warmup() const;
};

}  // namespace ptdp
