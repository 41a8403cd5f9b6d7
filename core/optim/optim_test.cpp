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
