// LLaMA's CPU operations: RMSNorm, rotary embeddings and SwiGLU against finite differences in
// f64 (relative error < 1e-6) and against their definitions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend/backend.h"
#include "core/testing/gradcheck.h"

namespace ptdp {
namespace {

using testing::dot;
using testing::grad_rel_error;
using testing::randn;

constexpr double kLlamaTol = 1e-6;
constexpr DType kF64 = DType::F64;

class LlamaOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

TEST_F(LlamaOps, RmsNormMatchesFiniteDifferencesAndItsDefinition) {
  const int64_t n = 5, c = 9;
  Tensor x = randn({n, c}, 1, 2.0), g = randn({c}, 2), r = randn({n, c}, 3);
  Tensor y = Tensor::empty({n, c}, kF64), rstd = Tensor::empty({n}, kF64);
  auto objective = [&] {
    be->rmsnorm_forward(y, rstd, x, g, 1e-6);
    return dot(y, r);
  };
  objective();
  for (int64_t i = 0; i < c; ++i) {  // row 0 by the definition
    double ms = 0;
    for (int64_t j = 0; j < c; ++j) ms += x.data<double>()[j] * x.data<double>()[j] / c;
    EXPECT_NEAR(y.data<double>()[i], x.data<double>()[i] / std::sqrt(ms + 1e-6) * g.data<double>()[i], 1e-12);
  }
  Tensor dx = Tensor::zeros({n, c}, kF64), dg = Tensor::zeros({c}, kF64);
  be->rmsnorm_backward(dx, dg, r, x, g, rstd);
  EXPECT_LT(grad_rel_error(objective, x, dx), kLlamaTol);
  EXPECT_LT(grad_rel_error(objective, g, dg), kLlamaTol);
}

TEST_F(LlamaOps, RopeRotatesQueryAndKeyPairsAndItsInverseIsItsGradient) {
  const int b = 2, s = 5, a = 3, hd = 4;
  const int64_t n = int64_t(b) * s, w = 3 * a * hd;
  Tensor x = randn({n, w}, 4), r = randn({n, w}, 5), y = Tensor::empty({n, w}, kF64);
  const double theta = 10000;
  auto objective = [&] {
    be->rope(y, x, s, a, hd, theta, false);
    return dot(y, r);
  };
  objective();
  // Row 3 (position 3), head 1, q element 1 pairs with element 1 + hd/2 at angle 3·θ^(-2/hd).
  const double ang = 3 * std::pow(theta, -2.0 / hd);
  const double* xr = x.data<double>() + 3 * w + 1 * 3 * hd;
  const double* yr = y.data<double>() + 3 * w + 1 * 3 * hd;
  EXPECT_NEAR(yr[1], xr[1] * std::cos(ang) - xr[3] * std::sin(ang), 1e-12);
  EXPECT_NEAR(yr[3], xr[3] * std::cos(ang) + xr[1] * std::sin(ang), 1e-12);
  for (int i = 0; i < hd; ++i) EXPECT_EQ(yr[2 * hd + i], xr[2 * hd + i]);  // v untouched
  // Position 0 is the identity; the inverse undoes the rotation (in place too).
  for (int64_t i = 0; i < w; ++i) EXPECT_NEAR(y.data<double>()[i], x.data<double>()[i], 1e-15);
  Tensor back = y.clone();
  be->rope(back, back, s, a, hd, theta, true);
  for (int64_t i = 0; i < n * w; ++i) EXPECT_NEAR(back.data<double>()[i], x.data<double>()[i], 1e-12);
  Tensor dx = Tensor::empty({n, w}, kF64);
  be->rope(dx, r, s, a, hd, theta, true);
  EXPECT_LT(grad_rel_error(objective, x, dx), kLlamaTol);
}

TEST_F(LlamaOps, SwigluMatchesFiniteDifferencesAndItsDefinition) {
  const int64_t n = 4, f = 6;
  Tensor x = randn({n, 2 * f}, 6, 2.0), r = randn({n, f}, 7), y = Tensor::empty({n, f}, kF64);
  auto objective = [&] {
    be->swiglu_forward(y, x);
    return dot(y, r);
  };
  objective();
  const double g = x.data<double>()[1], u = x.data<double>()[f + 1];
  EXPECT_NEAR(y.data<double>()[1], g / (1 + std::exp(-g)) * u, 1e-12);
  Tensor dx = Tensor::empty({n, 2 * f}, kF64);
  be->swiglu_backward(dx, x, r);
  EXPECT_LT(grad_rel_error(objective, x, dx), kLlamaTol);
}

TEST_F(LlamaOps, F32FollowsF64) {
  const int64_t n = 6, c = 16;
  Tensor x64 = randn({n, 2 * c}, 8), g64 = randn({c}, 9);
  Tensor x = Tensor::empty({n, 2 * c}, DType::F32), g = Tensor::empty({c}, DType::F32);
  be->copy(x, x64);
  be->copy(g, g64);
  Tensor y = Tensor::empty({n, c}, DType::F32), y64 = Tensor::empty({n, c}, kF64);
  be->swiglu_forward(y, x);
  be->swiglu_forward(y64, x64);
  for (int64_t i = 0; i < n * c; ++i) EXPECT_NEAR(y.data<float>()[i], y64.data<double>()[i], 1e-5);
  Tensor xn = x.view(0, {n * 2, c}), xn64 = x64.view(0, {n * 2, c});
  Tensor z = Tensor::empty({n * 2, c}, DType::F32), z64 = Tensor::empty({n * 2, c}, kF64);
  Tensor rs = Tensor::empty({n * 2}, DType::F32), rs64 = Tensor::empty({n * 2}, kF64);
  be->rmsnorm_forward(z, rs, xn, g, 1e-5);
  be->rmsnorm_forward(z64, rs64, xn64, g64, 1e-5);
  for (int64_t i = 0; i < n * 2 * c; ++i) EXPECT_NEAR(z.data<float>()[i], z64.data<double>()[i], 1e-5);
}

}  // namespace
}  // namespace ptdp
