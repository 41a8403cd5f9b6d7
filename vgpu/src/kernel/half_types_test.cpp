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
#include <random>
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
  const float sum = float(h) + float(b);  // h + b is ambiguous, as under nvcc
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

// The value x rounded once to binary16 (nearest, ties to even; infinity from 65520 up): the
// reference for operations whose exact result a double holds (+, -, * of two halves) or whose
// double result rounds innocuously (/).
double round_to_half(double x) {
  if (std::isnan(x)) return x;
  if (std::fabs(x) >= 65520.0) return std::copysign(INFINITY, x);
  if (x == 0) return x;
  const int e = std::max(std::ilogb(x), -14);
  const double ulp = std::ldexp(1.0, e - 10);
  return std::nearbyint(x / ulp) * ulp;
}

TEST(HalfTypes, HalfArithmeticRoundsOnceToHalfAndOverflowsToInfinity) {
  const __half big = 256.0f;
  EXPECT_EQ(hbits(big * big), 0x7c00);                          // 65536: past 65504, inf as on a GPU
  EXPECT_EQ(float(__half(255.0f) * __half(255.0f)), 65024.0f);  // 65025 rounded to a half
  EXPECT_EQ(hbits(__half(65504.0f) + __half(16.0f)), 0x7c00);   // 65520: the tie rounds to inf
  EXPECT_EQ(float(__half(65504.0f) + __half(8.0f)), 65504.0f);
  EXPECT_EQ(hbits(-big * big), 0xfc00);
  EXPECT_EQ(float(__half(1.0f) + __half(std::ldexp(1.0f, -11))), 1.0f);  // the tie goes to even
  EXPECT_EQ(hbits(__half(1.0f) / __half(3.0f)), 0x3555);
  EXPECT_EQ(float(__half(std::ldexp(1.0f, -14)) * __half(0.5f)), std::ldexp(1.0f, -15));  // a subnormal
  __half h = 2047.0f;
  ++h;
  EXPECT_EQ(float(h), 2048.0f);
  h++;
  EXPECT_EQ(float(h), 2048.0f);  // 2049 is not a half: back to even
  h -= __half(1.0f);
  EXPECT_EQ(float(h), 2047.0f);
  EXPECT_EQ(float(-h), -2047.0f);
  // Exactly rounded, sampled over all bit patterns.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pattern(0, 0xffff);
  for (int k = 0; k < 200000; ++k) {
    const __half a = __ushort_as_half(uint16_t(pattern(rng))), b = __ushort_as_half(uint16_t(pattern(rng)));
    const double x = float(a), y = float(b);
    if (std::isnan(x) || std::isnan(y)) continue;
    const std::pair<__half, double> cases[] = {{a + b, x + y}, {a - b, x - y}, {a * b, x * y}, {a / b, x / y}};
    for (const auto& [got, exact] : cases) {
      const double want = round_to_half(exact);
      if (std::isnan(want)) {
        EXPECT_TRUE(__hisnan(got));
      } else {
        ASSERT_EQ(double(float(got)), want) << x << " and " << y;
      }
    }
  }
}

TEST(HalfTypes, ComparisonsAndIntegerConversionsFollowCuda) {
  const __half nan = __ushort_as_half(0x7e00), one = 1.0f, two = 2.0f;
  EXPECT_FALSE(nan == nan);
  EXPECT_TRUE(nan != nan);  // unordered not-equal, as __hneu
  EXPECT_FALSE(nan < one);
  EXPECT_FALSE(__hne(nan, one));  // ordered
  EXPECT_TRUE(one < two && two >= one && one <= one && two > one);
  EXPECT_EQ(int(__half(-2.75f)), -2);  // toward zero
  EXPECT_EQ(int(nan), 0);
  EXPECT_EQ(static_cast<unsigned>(__half(-3.0f)), 0u);  // saturating
  EXPECT_EQ(static_cast<short>(__half(65504.0f)), 32767);
  EXPECT_TRUE(bool(nan));
  EXPECT_FALSE(bool(__half(-0.0f)));
  EXPECT_EQ(static_cast<long long>(__nv_bfloat16(-1e20f)), std::numeric_limits<long long>::min());
}

TEST(HalfTypes, Bfloat16ArithmeticRoundsOnceAndOverflowsToInfinity) {
  const __nv_bfloat16 big = 3e38f;
  EXPECT_EQ(bbits(big * __nv_bfloat16(2.0f)), 0x7f80);
  EXPECT_EQ(float(__nv_bfloat16(1.0f) + __nv_bfloat16(std::ldexp(1.0f, -8))), 1.0f);  // tie to even
  EXPECT_EQ(float(__nv_bfloat16(1.0f) + __nv_bfloat16(std::ldexp(1.0f, -7))), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(float(__nv_bfloat16(255.0f) * __nv_bfloat16(255.0f)), 65024.0f);  // 65025: 8 bits
  __nv_bfloat16 s = 256.0f;
  s += __nv_bfloat16(1.0f);  // 257 is not a bfloat16
  EXPECT_EQ(float(s), 256.0f);
  EXPECT_TRUE(__nv_bfloat16(1.0f) < __nv_bfloat16(2.0f));
}

TEST(HalfTypes, PairsComputeLaneByLane) {
  const __half2 a(__half(256.0f), __half(3.0f)), b(__half(256.0f), __half(0.5f));
  const __half2 p = a * b;
  EXPECT_EQ(hbits(p.x), 0x7c00);
  EXPECT_EQ(float(p.y), 1.5f);
  EXPECT_EQ(float(__low2half(a + b)), 512.0f);
  EXPECT_EQ(float(__high2float(a - b)), 2.5f);
  EXPECT_TRUE(a == a);
  EXPECT_FALSE(a < b);  // true only when both lanes are
  const __nv_bfloat162 c = __floats2bfloat162_rn(1.0f, 3e38f);
  const __nv_bfloat162 d = c * __float2bfloat162_rn(2.0f);
  EXPECT_EQ(float(d.x), 2.0f);
  EXPECT_EQ(bbits(d.y), 0x7f80);
  EXPECT_EQ(__half22float2(__floats2half2_rn(0.5f, 65504.0f)).y, 65504.0f);
}

}  // namespace
