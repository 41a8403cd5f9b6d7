// __half and __nv_bfloat16 conversions against reference bit patterns (IEEE 754 binary16 and
// bfloat16, round to nearest even): ties, NaN, infinities, the largest finite values, f16
// subnormals, and exhaustive round trips and midpoints.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel/executor.h"

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
uint16_t hbits(__half h) { return __half_as_ushort(h); }
uint16_t bbits(__nv_bfloat16 b) { return __bfloat16_as_ushort(b); }

TEST(HalfTypes, Bfloat16ReferencePatterns) {
  EXPECT_EQ(bbits(__float2bfloat16_rn(1.0f)), 0x3f80);
  EXPECT_EQ(bbits(__float2bfloat16_rn(-2.0f)), 0xc000);
  EXPECT_EQ(bbits(__float2bfloat16_rn(-0.0f)), 0x8000);
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x3f808000))), 0x3f80);  // tie, even below
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x3f818000))), 0x3f82);  // tie, even above
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x3f808001))), 0x3f81);  // above the tie
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x3f807fff))), 0x3f80);  // below the tie
  EXPECT_EQ(bbits(__float2bfloat16(std::numeric_limits<float>::infinity())), 0x7f80);
  EXPECT_EQ(bbits(__float2bfloat16(-std::numeric_limits<float>::infinity())), 0xff80);
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x7f7f0000))), 0x7f7f);  // largest finite bfloat16
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x7f7f7fff))), 0x7f7f);
  EXPECT_EQ(bbits(__float2bfloat16_rn(from_bits(0x7f7f8000))), 0x7f80);  // tie past it: inf
  EXPECT_EQ(bbits(__float2bfloat16_rn(std::numeric_limits<float>::max())), 0x7f80);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t b = bbits(__float2bfloat16_rn(from_bits(nan)));
    EXPECT_GT(b & 0x7fff, 0x7f80) << std::hex << nan;  // still a NaN (not rounded into inf)
    EXPECT_TRUE(std::isnan(__bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{b}))));
  }
  EXPECT_EQ(bits(__bfloat162float(__ushort_as_bfloat16(0x3f80))), 0x3f800000u);
  EXPECT_EQ(bits(__bfloat162float(__ushort_as_bfloat16(0x0001))), 0x00010000u);  // subnormal stays exact
  EXPECT_EQ(bits(__bfloat162float(__ushort_as_bfloat16(0xff80))), 0xff800000u);
}

TEST(HalfTypes, HalfReferencePatterns) {
  EXPECT_EQ(hbits(__float2half_rn(1.0f)), 0x3c00);
  EXPECT_EQ(hbits(__float2half_rn(-2.0f)), 0xc000);
  EXPECT_EQ(hbits(__float2half_rn(-0.0f)), 0x8000);
  EXPECT_EQ(hbits(__float2half_rn(1.0f + std::ldexp(1.0f, -11))), 0x3c00);      // tie, even below
  EXPECT_EQ(hbits(__float2half_rn(1.0f + 3 * std::ldexp(1.0f, -11))), 0x3c02);  // tie, even above
  EXPECT_EQ(hbits(__float2half_rn(65504.0f)), 0x7bff);                          // largest finite
  EXPECT_EQ(hbits(__float2half_rn(std::nextafter(65520.0f, 0.0f))), 0x7bff);
  EXPECT_EQ(hbits(__float2half_rn(65520.0f)), 0x7c00);  // tie past the largest finite: inf
  EXPECT_EQ(hbits(__float2half(1e6f)), 0x7c00);
  EXPECT_EQ(hbits(__float2half(-1e6f)), 0xfc00);
  EXPECT_EQ(hbits(__float2half(std::numeric_limits<float>::infinity())), 0x7c00);
  // Subnormals (units of 2^-24).
  const float u = std::ldexp(1.0f, -24);
  EXPECT_EQ(hbits(__float2half_rn(u)), 0x0001);
  EXPECT_EQ(hbits(__float2half_rn(0.5f * u)), 0x0000);   // tie with zero: even
  EXPECT_EQ(hbits(__float2half_rn(-0.5f * u)), 0x8000);
  EXPECT_EQ(hbits(__float2half_rn(0.75f * u)), 0x0001);
  EXPECT_EQ(hbits(__float2half_rn(0.25f * u)), 0x0000);
  EXPECT_EQ(hbits(__float2half_rn(1.5f * u)), 0x0002);   // tie: even above
  EXPECT_EQ(hbits(__float2half_rn(2.5f * u)), 0x0002);   // tie: even below
  EXPECT_EQ(hbits(__float2half_rn(1023 * u)), 0x03ff);   // largest subnormal
  EXPECT_EQ(hbits(__float2half_rn(1023.5f * u)), 0x0400);  // tie: rounds into the smallest normal
  EXPECT_EQ(hbits(__float2half_rn(std::ldexp(1.0f, -14))), 0x0400);
  EXPECT_EQ(hbits(__float2half_rn(std::ldexp(1.0f, -40))), 0x0000);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7f802000u}) {
    const uint16_t h = hbits(__float2half_rn(from_bits(nan)));
    EXPECT_GT(h & 0x7fff, 0x7c00) << std::hex << nan;
  }
  EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), u);
  EXPECT_EQ(__half2float(__ushort_as_half(0x03ff)), 1023 * u);
  EXPECT_EQ(__half2float(__ushort_as_half(0x7bff)), 65504.0f);
  EXPECT_EQ(__half2float(__ushort_as_half(0xfc00)), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(__half2float(__ushort_as_half(0x7e00))));
  EXPECT_TRUE(__hisnan(__ushort_as_half(0x7c01)));
  EXPECT_EQ(__hisinf(__ushort_as_half(0xfc00)), -1);
}

// Every pattern converts to float and back unchanged, and the midpoint of every pair of adjacent
// finite values rounds to the one with an even last bit.
template <class T, class ToFloat, class FromFloat>
void exhaustive(uint16_t exp_mask, ToFloat to_float, FromFloat from_float, uint16_t (*get)(T)) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const bool nan = (h & exp_mask) == exp_mask && (h & ~exp_mask & 0x7fff) != 0;
    const float f = to_float(h);
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(get(from_float(f)), h) << std::hex << b;
    const uint16_t next = static_cast<uint16_t>(h + 1);
    if ((next & exp_mask) != exp_mask && (next & 0x8000) == (h & 0x8000)) {
      const float g = to_float(next);
      const float mid = f + (g - f) / 2;  // exact: one more significand bit than T has
      const uint16_t even = (h & 1) ? next : h;
      ASSERT_EQ(get(from_float(mid)), even) << std::hex << b;
    }
  }
}

TEST(HalfTypes, ExhaustiveRoundTripsAndTies) {
  exhaustive<__half>(
      0x7c00, [](uint16_t h) { return __half2float(__ushort_as_half(h)); },
      [](float f) { return __float2half_rn(f); }, &hbits);
  exhaustive<__nv_bfloat16>(
      0x7f80, [](uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); },
      [](float f) { return __float2bfloat16_rn(f); }, &bbits);
}

TEST(HalfTypes, StorageAndImplicitConversions) {
  static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2);
  __half h = 0.5f;
  __nv_bfloat16 b = 3;  // integers too, as CUDA's constructors
  const float sum = h + b;  // through float
  EXPECT_EQ(sum, 3.5f);
  const __half z{};  // value-initialised: zero
  EXPECT_EQ(hbits(z), 0);
  std::vector<__nv_bfloat16> v(4, __nv_bfloat16(1.0f));
  EXPECT_EQ(static_cast<float>(v[3]), 1.0f);
}

__global__ void convert_in_kernel(__half* h, __nv_bfloat16* b, const float* x) {
  h[threadIdx.x] = __float2half_rn(x[threadIdx.x]);
  b[threadIdx.x] = __float2bfloat16_rn(__half2float(h[threadIdx.x]) * 2.0f);
}

TEST(HalfTypes, ConversionsRunInKernels) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * i;
  std::vector<__half> h(32);
  std::vector<__nv_bfloat16> b(32);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("convert_in_kernel", 1, 32, convert_in_kernel, h.data(), b.data(), x.data()),
            cudaSuccess);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(hbits(h[i]), hbits(__float2half_rn(x[i])));
    EXPECT_EQ(bbits(b[i]), bbits(__float2bfloat16_rn(__half2float(__float2half_rn(x[i])) * 2.0f)));
  }
}

}  // namespace
