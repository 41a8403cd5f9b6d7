// The NCCL subset's arithmetic: element sizes, 16-bit float conversions, and reductions in rank
// order with one rounding for f16/bf16.
#include "nccl/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace vgpu::nccl {
namespace {

TEST(NcclReduce, ElementSizesFollowTheDataTypes) {
  EXPECT_EQ(dtype_size(ncclInt8), 1u);
  EXPECT_EQ(dtype_size(ncclFloat16), 2u);
  EXPECT_EQ(dtype_size(ncclBfloat16), 2u);
  EXPECT_EQ(dtype_size(ncclInt32), 4u);
  EXPECT_EQ(dtype_size(ncclFloat32), 4u);
  EXPECT_EQ(dtype_size(ncclFloat64), 8u);
  EXPECT_EQ(dtype_size(ncclUint64), 8u);
  EXPECT_EQ(dtype_size(12), 0u);
  EXPECT_EQ(dtype_size(-1), 0u);
  EXPECT_FALSE(dtype_reducible(ncclFloat8e4m3));
  EXPECT_TRUE(dtype_reducible(ncclBfloat16));
}

TEST(NcclReduce, HalfConversionsRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    EXPECT_EQ(float_to_half(f), uint16_t(h)) << std::hex << h;
  }
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));             // smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(70000.0f), 0x7c00);                          // overflow -> inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);             // tie below the smallest subnormal -> 0
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(NcclReduce, Bf16ConversionsRoundToNearestEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_float(uint16_t(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f), uint16_t(b));
  }
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even (down)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(NcclReduce, FloatSumIsTakenInRankOrder) {
  // In f32, (1 + 1e8) + -1e8 = 0 but (1e8 + -1e8) + 1 = 1: the result shows the order used.
  std::vector<float> a{1.0f}, b{1e8f}, c{-1e8f};
  const void* in[] = {a.data(), b.data(), c.data()};
  float out = -1;
  reduce(ncclFloat32, ncclSum, in, 3, &out, 1);
  EXPECT_EQ(out, (1.0f + 1e8f) + -1e8f);
  const void* in2[] = {b.data(), c.data(), a.data()};
  reduce(ncclFloat32, ncclSum, in2, 3, &out, 1);
  EXPECT_EQ(out, 1.0f);
}

// NCCL adds 16-bit floats pair by pair in their own type (__hadd2), and partial sums travel
// between ranks in it: each 2^-9 is a quarter ulp of bf16 at 1 and is lost when added to 1, while
// three of them added first make 3/4 ulp, which rounds up. (An f32 accumulation rounded once
// would give 1 + 2^-7 both ways.)
TEST(NcclReduce, Bf16SumRoundsAfterEveryStepInRankOrder) {
  const uint16_t one = float_to_bf16(1.0f), small = float_to_bf16(std::ldexp(1.0f, -9));
  std::vector<uint16_t> big{one}, s1{small}, s2{small}, s3{small};
  uint16_t out = 0;
  const void* one_first[] = {big.data(), s1.data(), s2.data(), s3.data()};
  reduce(ncclBfloat16, ncclSum, one_first, 4, &out, 1);
  EXPECT_EQ(bf16_to_float(out), 1.0f);
  const void* one_last[] = {s1.data(), s2.data(), s3.data(), big.data()};
  reduce(ncclBfloat16, ncclSum, one_last, 4, &out, 1);
  EXPECT_EQ(bf16_to_float(out), 1.0f + std::ldexp(1.0f, -7));
}

TEST(NcclReduce, HalfSumRoundsAfterEveryStepInRankOrder) {
  const uint16_t one = float_to_half(1.0f), small = float_to_half(std::ldexp(1.0f, -12));
  std::vector<uint16_t> big{one}, s1{small}, s2{small}, s3{small};
  uint16_t out = 0;
  const void* one_first[] = {big.data(), s1.data(), s2.data(), s3.data()};
  reduce(ncclFloat16, ncclSum, one_first, 4, &out, 1);
  EXPECT_EQ(half_to_float(out), 1.0f);
  const void* one_last[] = {s1.data(), s2.data(), s3.data(), big.data()};
  reduce(ncclFloat16, ncclSum, one_last, 4, &out, 1);
  EXPECT_EQ(half_to_float(out), 1.0f + std::ldexp(1.0f, -10));
}

// ncclAvg of floats is NCCL's PreMulSum: each input times 1/n first, so three inputs of 3e38
// average to about 3e38 where their f32 sum would overflow; integers are summed and divided.
TEST(NcclReduce, FloatAverageMultipliesEachInputByOneOverNFirst) {
  std::vector<float> a{3e38f}, b{3e38f}, c{3e38f};
  const void* in[] = {a.data(), b.data(), c.data()};
  float out = 0;
  reduce(ncclFloat32, ncclAvg, in, 3, &out, 1);
  const float third = 3e38f * float(1.0 / 3);
  EXPECT_EQ(out, (third + third) + third);
  EXPECT_TRUE(std::isfinite(out));
}

TEST(NcclReduce, MaxMinProdAvgAndIntegerWraparound) {
  std::vector<int32_t> a{1, -5, 2147483647, 6}, b{3, -7, 1, 2};
  const void* in[] = {a.data(), b.data()};
  std::vector<int32_t> out(4);
  reduce(ncclInt32, ncclMax, in, 2, out.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{3, -5, 2147483647, 6}));
  reduce(ncclInt32, ncclMin, in, 2, out.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{1, -7, 1, 2}));
  reduce(ncclInt32, ncclSum, in, 2, out.data(), 4);
  EXPECT_EQ(out[2], int32_t(-2147483647 - 1));  // wraps
  reduce(ncclInt32, ncclProd, in, 2, out.data(), 4);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[3], 12);
  reduce(ncclInt32, ncclAvg, in, 2, out.data(), 4);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], -6);
}

TEST(NcclReduce, FloatMaxPropagatesNan) {
  std::vector<double> a{1.0, std::nan("")}, b{std::nan(""), 2.0};
  const void* in[] = {a.data(), b.data()};
  std::vector<double> out(2);
  reduce(ncclFloat64, ncclMax, in, 2, out.data(), 2);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

TEST(NcclReduce, LongBuffersReduceAcrossBlocks) {
  const size_t n = 1000;  // several accumulation blocks, the last one partial
  std::vector<float> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = float(i);
    b[i] = 0.5f * float(i);
  }
  const void* in[] = {a.data(), b.data()};
  reduce(ncclFloat32, ncclSum, in, 2, out.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 1.5f * float(i)) << i;
}

}  // namespace
}  // namespace vgpu::nccl
