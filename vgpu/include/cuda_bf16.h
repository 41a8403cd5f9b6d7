// vgpu: __nv_bfloat16 (the upper half of an IEEE binary32) as CUDA's cuda_bf16.h declares it, for
// host compilation: 2-byte storage, conversions with float (round to nearest even), host and kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <vgpu/device.h>
#include <vgpu/half_ops.h>

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
  // CUDA's implicit conversions to the integer types (round toward zero, NaN to 0, saturating:
  // __bfloat162int_rz and its kin) and to bool (nonzero, NaN included).
  VGPU_16BIT_INTEGER_CONVERSIONS(vgpu::detail::bf16_bits_to_float(__x))
  __host__ __device__ operator bool() const { return (__x & 0x7fffu) != 0; }

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
__host__ __device__ inline bool __hisnan(__nv_bfloat16 b) { return (__bfloat16_as_ushort(b) & 0x7fffu) > 0x7f80u; }
__host__ __device__ inline int __hisinf(__nv_bfloat16 b) {  // -1 for -inf, 1 for +inf, else 0 (as CUDA's)
  const unsigned short u = __bfloat16_as_ushort(b);
  return (u & 0x7fffu) != 0x7f80u ? 0 : ((u & 0x8000u) ? -1 : 1);
}

// CUDA's arithmetic, comparison and 2-vector operators of __nv_bfloat16 (cuda_bf16.hpp), each
// rounded to the nearest bfloat16 (ties to even) and overflowing to infinity as the GPU's bf16
// instructions do (vgpu/half_ops.h).
VGPU_16BIT_ARITHMETIC(__nv_bfloat16)

struct __nv_bfloat162_raw {
  unsigned short x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __host__ __device__ __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  __host__ __device__ __nv_bfloat162(const __nv_bfloat162_raw& r)
      : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
  __host__ __device__ operator __nv_bfloat162_raw() const {
    return __nv_bfloat162_raw{__bfloat16_as_ushort(x), __bfloat16_as_ushort(y)};
  }
};
static_assert(sizeof(__nv_bfloat162) == 4 && std::is_trivially_copyable_v<__nv_bfloat162>);
typedef __nv_bfloat162 nv_bfloat162;
VGPU_16BIT_PAIR(__nv_bfloat162, __nv_bfloat16)
__host__ __device__ inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat162(a, b);
}
__host__ __device__ inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
__host__ __device__ inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
__host__ __device__ inline float __low2float(__nv_bfloat162 h) { return float(h.x); }
__host__ __device__ inline float __high2float(__nv_bfloat162 h) { return float(h.y); }
__host__ __device__ inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
__host__ __device__ inline __nv_bfloat162 __float2bfloat162_rn(float a) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a));
}
__host__ __device__ inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2(float(h.x), float(h.y)); }
__host__ __device__ inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
