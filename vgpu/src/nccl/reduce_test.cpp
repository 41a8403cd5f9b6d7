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

TEST(NcclReduce, Bf16SumAccumulatesInF32AndRoundsOnce) {
  // Each 2^-9 is a quarter ulp of bf16 at 1: rounding after every addition would stay at 1, while
  // the f32 sum 1 + 3 * 2^-9 rounds once, to 1 + 2^-7.
  const uint16_t one = float_to_bf16(1.0f), small = float_to_bf16(std::ldexp(1.0f, -9));
  std::vector<uint16_t> r0{one}, r1{small}, r2{small}, r3{small};
  const void* in[] = {r0.data(), r1.data(), r2.data(), r3.data()};
  uint16_t out = 0;
  reduce(ncclBfloat16, ncclSum, in, 4, &out, 1);
  EXPECT_EQ(bf16_to_float(out), 1.0f + std::ldexp(1.0f, -7));
}

TEST(NcclReduce, HalfSumAccumulatesInF32AndRoundsOnce) {
  const uint16_t one = float_to_half(1.0f), small = float_to_half(std::ldexp(1.0f, -12));
  std::vector<uint16_t> r0{one}, r1{small}, r2{small}, r3{small};
  const void* in[] = {r0.data(), r1.data(), r2.data(), r3.data()};
  uint16_t out = 0;
  reduce(ncclFloat16, ncclSum, in, 4, &out, 1);
  EXPECT_EQ(half_to_float(out), 1.0f + std::ldexp(1.0f, -10));  // f32 1 + 3*2^-12 rounds up to 1 + 2^-10
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
