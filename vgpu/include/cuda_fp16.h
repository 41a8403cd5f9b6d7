// vgpu: __half (IEEE 754 binary16) as CUDA's cuda_fp16.h declares it, for host compilation:
// 2-byte storage, conversions from and to float with round-to-nearest-even, usable on the host and in kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <vgpu/device.h>
#include <vgpu/half_ops.h>

namespace vgpu::detail {

// float -> binary16, round to nearest, ties to even; NaN stays NaN (canonical 0x7fff, as the
// device's cvt.rn.f16.f32 gives), magnitudes from 65520 up (halfway past the largest finite,
// 65504) become infinity, and values below 2^-14 become subnormals (IEEE 754-2008 3.6, 4.3.1).
inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fffu;                              // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (or inf): inf
  if (x >= 0x38800000u) {                                           // normal: >= 2^-14
    uint32_t h = (x - 0x38000000u) >> 13;                           // rebias 127 -> 15
    const uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;         // carries into the exponent
    return static_cast<uint16_t>(sign | h);
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25 (half the smallest subnormal): ties to even zero
  // Subnormal: value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e).
  const uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may round up to 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);  // inf, or NaN with its payload
  } else if (e != 0) {
    x = sign | ((e + 112) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {  // subnormal: normalise
    e = 113;
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    x = sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace vgpu::detail

struct __half_raw {
  unsigned short x;
};

struct __half {
  __half() = default;  // trivial, as CUDA's: uninitialised unless value-initialised
  __host__ __device__ __half(const __half_raw& r) : __x(r.x) {}
  __host__ __device__ __half(float f) : __x(vgpu::detail::float_to_half_bits(f)) {}
  // double goes through float: exact for every double that a half can hold, and used nowhere
  // the double-rounding corner matters in ptdp.
  __host__ __device__ __half(double d) : __half(static_cast<float>(d)) {}
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  __host__ __device__ __half(I i) : __half(static_cast<float>(i)) {}
  __host__ __device__ operator float() const { return vgpu::detail::half_bits_to_float(__x); }
  __host__ __device__ operator __half_raw() const { return __half_raw{__x}; }
  // CUDA's implicit conversions to the integer types (round toward zero, NaN to 0, saturating:
  // __half2int_rz and its kin) and to bool (nonzero, NaN included).
  VGPU_16BIT_INTEGER_CONVERSIONS(vgpu::detail::half_bits_to_float(__x))
  __host__ __device__ operator bool() const { return (__x & 0x7fffu) != 0; }

 protected:
  unsigned short __x;
};
static_assert(sizeof(__half) == 2 && std::is_trivially_copyable_v<__half> && std::is_trivially_default_constructible_v<__half>);

__host__ __device__ inline __half __float2half_rn(float f) { return __half(f); }
__host__ __device__ inline __half __float2half(float f) { return __half(f); }
__host__ __device__ inline float __half2float(__half h) { return static_cast<float>(h); }
__host__ __device__ inline __half __ushort_as_half(unsigned short bits) { return __half(__half_raw{bits}); }
__host__ __device__ inline unsigned short __half_as_ushort(__half h) { return static_cast<__half_raw>(h).x; }
__host__ __device__ inline bool __hisnan(__half h) { return (__half_as_ushort(h) & 0x7fffu) > 0x7c00u; }
__host__ __device__ inline int __hisinf(__half h) {  // -1 for -inf, 1 for +inf, else 0 (as CUDA's)
  const unsigned short b = __half_as_ushort(h);
  return (b & 0x7fffu) != 0x7c00u ? 0 : ((b & 0x8000u) ? -1 : 1);
}

// CUDA's arithmetic, comparison and 2-vector operators of __half (cuda_fp16.hpp), each rounded to
// the nearest half (ties to even) and overflowing to infinity as the GPU's f16 instructions do,
// so that `a * b` of two halves is a half product here as under nvcc (vgpu/half_ops.h).
VGPU_16BIT_ARITHMETIC(__half)

struct __half2_raw {
  unsigned short x, y;
};
struct __half2 {
  __half x, y;
  __half2() = default;
  __host__ __device__ __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __host__ __device__ __half2(const __half2_raw& r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
  __host__ __device__ operator __half2_raw() const { return __half2_raw{__half_as_ushort(x), __half_as_ushort(y)}; }
};
static_assert(sizeof(__half2) == 4 && std::is_trivially_copyable_v<__half2>);
VGPU_16BIT_PAIR(__half2, __half)
__host__ __device__ inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
__host__ __device__ inline __half __low2half(__half2 h) { return h.x; }
__host__ __device__ inline __half __high2half(__half2 h) { return h.y; }
__host__ __device__ inline __half2 __lowhigh2highlow(__half2 h) { return __half2(h.y, h.x); }
__host__ __device__ inline float __low2float(__half2 h) { return float(h.x); }
__host__ __device__ inline float __high2float(__half2 h) { return float(h.y); }
__host__ __device__ inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
__host__ __device__ inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
__host__ __device__ inline float2 __half22float2(__half2 h) { return make_float2(float(h.x), float(h.y)); }
__host__ __device__ inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
