// vgpu: __nv_bfloat16 (the upper half of an IEEE binary32) as CUDA's cuda_bf16.h declares it, for
// host compilation: 2-byte storage, conversions with float (round to nearest even), host and kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <vgpu/device.h>

namespace vgpu::detail {

// float -> bfloat16, round to nearest, ties to even (adding 0x7fff plus the lowest kept bit, then
// truncating); NaN stays NaN (canonical 0x7fff, as CUDA's __float2bfloat16_rn returns); values
// at or past halfway beyond the largest finite (0x7f7f) round to infinity (IEEE 754-2008 4.3.1).
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace vgpu::detail

struct __nv_bfloat16_raw {
  unsigned short x;
};

struct __nv_bfloat16 {
  __nv_bfloat16() = default;  // trivial, as CUDA's: uninitialised unless value-initialised
  __host__ __device__ __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  __host__ __device__ __nv_bfloat16(float f) : __x(vgpu::detail::float_to_bf16_bits(f)) {}
  // double goes through float (double rounding possible only in corner cases ptdp never relies on).
  __host__ __device__ __nv_bfloat16(double d) : __nv_bfloat16(static_cast<float>(d)) {}
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  __host__ __device__ __nv_bfloat16(I i) : __nv_bfloat16(static_cast<float>(i)) {}
  __host__ __device__ operator float() const { return vgpu::detail::bf16_bits_to_float(__x); }
  __host__ __device__ operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }

 protected:
  unsigned short __x;
};
static_assert(sizeof(__nv_bfloat16) == 2 && std::is_trivially_copyable_v<__nv_bfloat16> &&
              std::is_trivially_default_constructible_v<__nv_bfloat16>);
typedef __nv_bfloat16 nv_bfloat16;

__host__ __device__ inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
__host__ __device__ inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
__host__ __device__ inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
__host__ __device__ inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  return __nv_bfloat16(__nv_bfloat16_raw{bits});
}
__host__ __device__ inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) {
  return static_cast<__nv_bfloat16_raw>(b).x;
}
