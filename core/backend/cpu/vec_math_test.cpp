// exp_f32 against the C library's exp in double, over the whole range it is used on.
#include "core/backend/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ptdp::cpu {
namespace {

TEST(VecMath, ExpIsWithinTwoUlpOverItsRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x = std::nextafter(x + 0.00731f, 100.0f)) {
    const double want = std::exp(double(x));
    const double ulp = std::nextafter(float(want), std::numeric_limits<float>::infinity()) - float(want);
    worst = std::max(worst, std::fabs(double(exp_f32(x)) - want) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
}

TEST(VecMath, ExpClampsInfinitiesAndKeepsNan) {
  EXPECT_GT(exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_LT(exp_f32(-std::numeric_limits<float>::infinity()), 1e-37f);
  EXPECT_TRUE(std::isfinite(exp_f32(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace ptdp::cpu
