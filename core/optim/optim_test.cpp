// Learning-rate schedule and AdamW's weight-decay groups.
#include <gtest/gtest.h>

#include <cmath>

#include "core/optim/adamw.h"

namespace ptdp {
namespace {

TEST(LrSchedule, WarmsUpLinearlyThenDecaysByCosineToMinLr) {
  LrSchedule s{.max_lr = 1.0, .min_lr = 0.1, .warmup_iters = 10, .decay_iters = 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(1), 0.1);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.1 + 0.9 * 0.5, 1e-12);  // half-way: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  LrSchedule constant{.max_lr = 0.3};
  EXPECT_DOUBLE_EQ(constant.at(0), 0.3);
  EXPECT_DOUBLE_EQ(constant.at(1000), 0.3);
}

// Megatron's other decay styles (optimizer_param_scheduler.py get_lr); the values are its formulas'
// worked out in Python.
TEST(LrSchedule, DecayStylesAreMegatrons) {
  LrSchedule linear{.max_lr = 1.0, .min_lr = 0.1, .warmup_iters = 4, .decay_iters = 10, .style = LrDecayStyle::Linear};
  EXPECT_DOUBLE_EQ(linear.at(7), 0.55);
  EXPECT_DOUBLE_EQ(linear.at(11), 0.1);
  LrSchedule constant = linear;
  constant.style = LrDecayStyle::Constant;
  EXPECT_DOUBLE_EQ(constant.at(2), 0.5);  // the warm-up still applies
  EXPECT_DOUBLE_EQ(constant.at(100), 1.0);
  LrSchedule isr{.max_lr = 1.0, .min_lr = 0.1, .warmup_iters = 4, .decay_iters = 100,
                 .style = LrDecayStyle::InverseSquareRoot};
  EXPECT_DOUBLE_EQ(isr.at(16), 0.5);
  EXPECT_DOUBLE_EQ(isr.at(50), 0.282842712474619);
  EXPECT_DOUBLE_EQ(isr.at(101), 0.1);
  LrSchedule wsd{.max_lr = 1.0, .min_lr = 0.1, .decay_iters = 10, .style = LrDecayStyle::Wsd, .wsd_decay_iters = 4};
  EXPECT_DOUBLE_EQ(wsd.at(6), 1.0);  // stable until the anneal's start
  EXPECT_DOUBLE_EQ(wsd.at(8), 0.47279220613578565);
  wsd.wsd_style = WsdDecayStyle::MinusSqrt;
  EXPECT_DOUBLE_EQ(wsd.at(9), 0.22057713659400527);
}

// --lr-warmup-fraction: Megatron's warm-up is fraction x decay samples, which need not end at an
// iteration's boundary (0.25 x 10 iterations x 3 samples = 7.5 samples).
TEST(LrSchedule, WarmupFractionCountsSamplesAsMegatron) {
  LrSchedule s{.max_lr = 1.0, .min_lr = 0.1, .warmup_fraction = 0.25, .decay_iters = 10, .batch = 3};
  EXPECT_DOUBLE_EQ(s.warmup(), 2.5);
  EXPECT_DOUBLE_EQ(s.at(2), 0.8);
  EXPECT_DOUBLE_EQ(s.at(3), 0.9901664203302125);
}

// The learning rate of each iteration, as Megatron's OptimizerParamScheduler gives it: get_lr() is
// read in the optimizer step and the scheduler advances after it, so iteration k runs at
// num_steps = k - 1 (iteration 1 at lr 0 under warm-up). Values for warm-up 4, decay to 10,
// max 1, min 0.1, worked out from Megatron's formulas.
TEST(AdamW, LearningRateOfEachIterationIsMegatrons) {
  const double expected[] = {0.0,  0.25, 0.5,  0.75, 1.0, 0.9397114317029974, 0.775, 0.55, 0.3250000000000001,
                             0.16028856829700258, 0.1, 0.1};
  ModelConfig c = preset_config("tiny");
  ParamLayout layout(c, ShardSpec{});
  auto be = make_cpu_backend();
  Tensor p = Tensor::zeros({layout.total()}, DType::F32), g = Tensor::zeros({layout.total()}, DType::F32);
  OptimizerConfig cfg;
  cfg.lr = LrSchedule{.max_lr = 1.0, .min_lr = 0.1, .warmup_iters = 4, .decay_iters = 10};
  AdamW opt(*be, layout, p, g, cfg);
  for (int k = 1; k <= 12; ++k) EXPECT_DOUBLE_EQ(opt.step().lr, expected[k - 1]) << "iteration " << k;
}

TEST(AdamW, DecaysMatricesButNotBiasesOrLayerNorm) {
  ModelConfig c = preset_config("tiny");
  ParamLayout layout(c, ShardSpec{});
  auto be = make_cpu_backend();
  Tensor p = Tensor::empty({layout.total()}, DType::F32), g = Tensor::zeros({layout.total()}, DType::F32);
  be->fill(p, 1.0);
  OptimizerConfig cfg;
  cfg.lr.max_lr = 0.1;
  cfg.weight_decay = 0.5;
  AdamW opt(*be, layout, p, g, cfg);
  StepInfo info = opt.step();  // zero gradients: only weight decay moves anything
  EXPECT_EQ(info.grad_norm, 0.0);
  for (const auto& e : layout.entries()) {
    float v = p.data<float>()[e.offset];
    EXPECT_FLOAT_EQ(v, e.decay ? 0.95f : 1.0f) << e.name;
  }
}

}  // namespace
}  // namespace ptdp
