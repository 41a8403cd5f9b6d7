// exp for float loops that the compiler vectorises (glibc's expf is a call per element; without
// -ffast-math GCC will not use libmvec's vector variants). Cephes' expf: range reduction by
// k·ln 2 in two parts, a degree-6 polynomial, 2^k put into the exponent bits. Within 2 ulp of
// std::exp on [-87, 88] (tested); arguments are clamped to that range, so exp(-inf) gives
// 2^-126 rather than 0 and exp(+inf) gives about 1.7e38; NaN in gives NaN out.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ptdp::cpu {

// Branch-free so that loops calling it vectorise (the clamps need -fno-trapping-math, which the
// CPU kernels are built with).
inline float exp_f32(float x) {
  const bool nan = x != x;
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float t = x * 1.44269504088896341f;      // log2(e)
  const float kf = (t + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5·2^23 pushes out the fraction
  float r = x - kf * 0.693359375f;  // ln 2 = 0.693359375 - 2.12194440e-4, the first part exact in float
  r = r + kf * 2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const int32_t bits = (int32_t(kf) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float e = p * scale;
  return nan ? x : e;
}

// exp for the kernels' element type: exp_f32 for float, the C library's for double (the f64
// gradient checks).
inline float exp_of(float x) { return exp_f32(x); }
inline double exp_of(double x) { return std::exp(x); }

}  // namespace ptdp::cpu
