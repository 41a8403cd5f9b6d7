// The precision-aware optimizer's bf16 moments (--exp-avg-dtype, --exp-avg-sq-dtype bf16) against
// a step written out here: the stored moments widened_state to f32, Adam in f32, the moments rounded
// back to bf16 (Transformer Engine's FusedAdam), the master weights f32.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/optim/adamw.h"

namespace ptdp {
namespace {

float adam_grad_value(int step, int64_t i) { return 1e-2f * float(std::sin(0.731 * double(i) + 1.37 * step)) + 1e-4f; }

struct AdamReference {
  std::vector<float> p, m, v;  // m, v: the bf16 values, widened_state
};

// `steps` AdamW steps of the layout's flat buffer, the moments rounded to bf16 after each (or not).
AdamReference adam_reference_steps(const ParamLayout& layout, const OptimizerConfig& cfg, int steps, bool bf16_moments) {
  const int64_t n = layout.total();
  AdamReference r{std::vector<float>(size_t(n), 0.02f), std::vector<float>(size_t(n), 0.0f),
              std::vector<float>(size_t(n), 0.0f)};
  std::vector<bool> decay(size_t(n), false);
  for (const auto& e : layout.entries())
    for (int64_t i = e.offset; i < e.offset + shape_numel(e.shape); ++i) decay[size_t(i)] = e.decay;
  auto round = [&](float x) { return bf16_moments ? bf16_to_float(float_to_bf16(x)) : x; };
  for (int k = 1; k <= steps; ++k) {
    const double lr = cfg.lr.at(k - 1);
    const float c1 = float(1.0 / (1.0 - std::pow(cfg.beta1, double(k))));
    const float c2 = float(1.0 / (1.0 - std::pow(cfg.beta2, double(k))));
    const float b1 = float(cfg.beta1), b2 = float(cfg.beta2), flr = float(lr), eps = float(cfg.eps);
    for (int64_t i = 0; i < n; ++i) {
      const float g = adam_grad_value(k, i);
      const float m = b1 * r.m[size_t(i)] + (1.0f - b1) * g;
      const float v = b2 * r.v[size_t(i)] + (1.0f - b2) * g * g;
      const float decay_factor = float(1.0 - lr * (decay[size_t(i)] ? cfg.weight_decay : 0.0));
      r.p[size_t(i)] = r.p[size_t(i)] * decay_factor - flr * (m * c1) / (std::sqrt(v * c2) + eps);
      r.m[size_t(i)] = round(m);
      r.v[size_t(i)] = round(v);
    }
  }
  return r;
}

std::vector<float> widened_state(const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    out[size_t(i)] = t.dtype() == DType::BF16 ? bf16_to_float(t.data<bf16>()[i]) : t.data<float>()[i];
  return out;
}

double max_elementwise_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(std::abs(double(b[i])), 1e-30));
  return worst;
}

TEST(PrecisionAwareAdamW, Bf16MomentsEqualAStepThatRoundsThemAfterEachUpdate) {
  ModelConfig c = preset_config("tiny");
  ParamLayout layout(c, ShardSpec{});
  auto be = make_cpu_backend();
  OptimizerConfig cfg;
  cfg.lr = LrSchedule{.max_lr = 1e-3};
  cfg.beta2 = 0.95;
  cfg.clip_grad = 0;
  cfg.precision_aware = true;
  cfg.exp_avg_dtype = cfg.exp_avg_sq_dtype = DType::BF16;
  const int steps = 6;
  Tensor p = Tensor::empty({layout.total()}, DType::F32), g = Tensor::empty({layout.total()}, DType::F32);
  be->fill(p, 0.02);
  AdamW opt(*be, layout, p, g, cfg);
  ASSERT_EQ(opt.exp_avg().dtype(), DType::BF16);
  ASSERT_EQ(opt.exp_avg_sq().dtype(), DType::BF16);
  EXPECT_EQ(opt.own_bytes(), 2 * 2 * layout.total());  // two bf16 moments; the weights are the master weights
  for (int k = 1; k <= steps; ++k) {
    for (int64_t i = 0; i < layout.total(); ++i) g.data<float>()[i] = adam_grad_value(k, i);
    opt.step();
  }
  const AdamReference rounded_ref = adam_reference_steps(layout, cfg, steps, true);
  const AdamReference f32_ref = adam_reference_steps(layout, cfg, steps, false);
  const std::vector<float> got_p = widened_state(p), got_m = widened_state(opt.exp_avg()), got_v = widened_state(opt.exp_avg_sq());
  EXPECT_LE(max_elementwise_rel_diff(got_p, rounded_ref.p), 1e-6);
  EXPECT_LE(max_elementwise_rel_diff(got_m, rounded_ref.m), 1.0 / 256);  // at most one bf16 step where f32 rounding differs
  EXPECT_LE(max_elementwise_rel_diff(got_v, rounded_ref.v), 1.0 / 256);
  int64_t same_m = 0;
  for (size_t i = 0; i < got_m.size(); ++i) same_m += got_m[i] == rounded_ref.m[i];
  EXPECT_GE(double(same_m), 0.999 * double(got_m.size()));
  // The rounding shows: the f32-moment step is another one.
  EXPECT_GT(max_elementwise_rel_diff(f32_ref.p, rounded_ref.p), 1e-5);
  EXPECT_GT(max_elementwise_rel_diff(got_p, f32_ref.p), 1e-5);
}

}  // namespace
}  // namespace ptdp
