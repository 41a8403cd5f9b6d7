// The dynamic loss scaler follows Megatron's DynamicGradScaler: skip on overflow, halve after
// `hysteresis` overflows (not below the minimum), double after `window` clean steps.
#include <gtest/gtest.h>

#include "core/optim/loss_scaler.h"

namespace ptdp {
namespace {

LossScaleConfig dynamic(double initial, int64_t window, int64_t hysteresis, double min_scale = 1) {
  LossScaleConfig c;
  c.dynamic = true;
  c.initial = initial;
  c.window = window;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  return c;
}

TEST(LossScaler, ConstantScaleNeverSkips) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.update(true));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, OverflowsSkipAndHalveAfterHysteresis) {
  LossScaler s(dynamic(1024, 1000, 2));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024);  // the first overflow is tolerated
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.update(true));  // no hysteresis left until the scale grows again
  EXPECT_EQ(s.scale(), 256);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 256);
}

TEST(LossScaler, CleanWindowDoublesAndRestoresHysteresis) {
  LossScaler s(dynamic(8, 3, 2));
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 4);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 4);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 8);
  EXPECT_TRUE(s.update(true));  // hysteresis is back to 2
  EXPECT_EQ(s.scale(), 8);
}

TEST(LossScaler, AnOverflowRestartsTheGrowthWindow) {
  LossScaler s(dynamic(8, 3, 5));
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 8);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 16);
}

TEST(LossScaler, NeverBelowTheMinimum) {
  LossScaler s(dynamic(4, 1000, 1, 2));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 2);
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler a(dynamic(64, 4, 2));
  a.update(true);
  a.update(false);
  LossScaler b(dynamic(64, 4, 2));
  b.restore(a.state());
  for (bool f : {false, false, true, true, false}) EXPECT_EQ(a.update(f), b.update(f));
  EXPECT_EQ(a.scale(), b.scale());
}

}  // namespace
}  // namespace ptdp
