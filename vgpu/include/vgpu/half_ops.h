// vgpu: the operators and arithmetic intrinsics that CUDA's cuda_fp16.hpp and cuda_bf16.hpp give
// __half and __nv_bfloat16 and their 2-vectors, stamped for each type by cuda_fp16.h and
// cuda_bf16.h. Each operation is computed in f32 and rounded once to the 16-bit type (nearest,
// ties to even; past the largest finite value, infinity). For +, -, * and / of two 16-bit values
// that is the correctly rounded result the GPU's f16/bf16 instructions give: f32's 24 bits are at
// least 2p + 2 for both types' precisions (11 and 8), so rounding twice cannot differ from
// rounding once (Figueroa, "When is double rounding innocuous?", 1995). fma goes through double.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <vgpu/device.h>

#ifndef VGPU_FLOAT2_DEFINED
#define VGPU_FLOAT2_DEFINED
struct float2 {  // CUDA's vector_types.h
  float x, y;
};
__host__ __device__ inline float2 make_float2(float x, float y) { return float2{x, y}; }
#endif

namespace vgpu::detail {
// __half2int_rz and its kin: toward zero, NaN to 0, saturating at the type's range.
template <class I> inline I float_to_int_rz(float f) {
  if (f != f) return 0;
  const double d = f;
  if (d <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (d >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(f);
}
}  // namespace vgpu::detail

// Member conversions; F: the value as float.
#define VGPU_16BIT_INTEGER_CONVERSION_(I, F) \
  __host__ __device__ operator I() const { return vgpu::detail::float_to_int_rz<I>(F); }
#define VGPU_16BIT_INTEGER_CONVERSIONS(F)                                                          \
  VGPU_16BIT_INTEGER_CONVERSION_(signed char, F)                                                   \
  VGPU_16BIT_INTEGER_CONVERSION_(unsigned char, F)                                                 \
  VGPU_16BIT_INTEGER_CONVERSION_(char, F)                                                          \
  VGPU_16BIT_INTEGER_CONVERSION_(short, F)                                                         \
  VGPU_16BIT_INTEGER_CONVERSION_(unsigned short, F)                                                \
  VGPU_16BIT_INTEGER_CONVERSION_(int, F)                                                           \
  VGPU_16BIT_INTEGER_CONVERSION_(unsigned int, F)                                                  \
  VGPU_16BIT_INTEGER_CONVERSION_(long, F)                                                          \
  VGPU_16BIT_INTEGER_CONVERSION_(unsigned long, F)                                                 \
  VGPU_16BIT_INTEGER_CONVERSION_(long long, F)                                                     \
  VGPU_16BIT_INTEGER_CONVERSION_(unsigned long long, F)

// The scalar intrinsics and operators of type T (cuda_fp16.hpp lines "operator+" to "operator<=";
// the same set in cuda_bf16.hpp).
#define VGPU_16BIT_ARITHMETIC(T)                                                                   \
  __host__ __device__ inline T __hadd(T a, T b) { return T(float(a) + float(b)); }                 \
  __host__ __device__ inline T __hsub(T a, T b) { return T(float(a) - float(b)); }                 \
  __host__ __device__ inline T __hmul(T a, T b) { return T(float(a) * float(b)); }                 \
  __host__ __device__ inline T __hdiv(T a, T b) { return T(float(a) / float(b)); }                 \
  __host__ __device__ inline T __hneg(T a) { return T(-float(a)); }                                \
  __host__ __device__ inline T __habs(T a) { return T(std::fabs(float(a))); }                      \
  __host__ __device__ inline T __hfma(T a, T b, T c) {                                             \
    return T(static_cast<float>(std::fma(double(float(a)), double(float(b)), double(float(c))))); \
  }                                                                                                \
  __host__ __device__ inline T __hmax(T a, T b) { return T(std::fmax(float(a), float(b))); }       \
  __host__ __device__ inline T __hmin(T a, T b) { return T(std::fmin(float(a), float(b))); }       \
  __host__ __device__ inline bool __heq(T a, T b) { return float(a) == float(b); }                 \
  __host__ __device__ inline bool __hne(T a, T b) { return float(a) < float(b) || float(a) > float(b); } \
  __host__ __device__ inline bool __hlt(T a, T b) { return float(a) < float(b); }                  \
  __host__ __device__ inline bool __hle(T a, T b) { return float(a) <= float(b); }                 \
  __host__ __device__ inline bool __hgt(T a, T b) { return float(a) > float(b); }                  \
  __host__ __device__ inline bool __hge(T a, T b) { return float(a) >= float(b); }                 \
  __host__ __device__ inline bool __hequ(T a, T b) { return !(float(a) < float(b) || float(a) > float(b)); } \
  __host__ __device__ inline bool __hneu(T a, T b) { return !(float(a) == float(b)); }             \
  __host__ __device__ inline bool __hltu(T a, T b) { return !(float(a) >= float(b)); }             \
  __host__ __device__ inline bool __hleu(T a, T b) { return !(float(a) > float(b)); }              \
  __host__ __device__ inline bool __hgtu(T a, T b) { return !(float(a) <= float(b)); }             \
  __host__ __device__ inline bool __hgeu(T a, T b) { return !(float(a) < float(b)); }              \
  __host__ __device__ inline T operator+(const T& a, const T& b) { return __hadd(a, b); }          \
  __host__ __device__ inline T operator-(const T& a, const T& b) { return __hsub(a, b); }          \
  __host__ __device__ inline T operator*(const T& a, const T& b) { return __hmul(a, b); }          \
  __host__ __device__ inline T operator/(const T& a, const T& b) { return __hdiv(a, b); }          \
  __host__ __device__ inline T& operator+=(T& a, const T& b) { return a = __hadd(a, b); }          \
  __host__ __device__ inline T& operator-=(T& a, const T& b) { return a = __hsub(a, b); }          \
  __host__ __device__ inline T& operator*=(T& a, const T& b) { return a = __hmul(a, b); }          \
  __host__ __device__ inline T& operator/=(T& a, const T& b) { return a = __hdiv(a, b); }          \
  __host__ __device__ inline T& operator++(T& a) { return a += T(1.0f); }                          \
  __host__ __device__ inline T& operator--(T& a) { return a -= T(1.0f); }                          \
  __host__ __device__ inline T operator++(T& a, int) {                                             \
    T old = a;                                                                                     \
    a += T(1.0f);                                                                                  \
    return old;                                                                                    \
  }                                                                                                \
  __host__ __device__ inline T operator--(T& a, int) {                                             \
    T old = a;                                                                                     \
    a -= T(1.0f);                                                                                  \
    return old;                                                                                    \
  }                                                                                                \
  __host__ __device__ inline T operator+(const T& a) { return a; }                                 \
  __host__ __device__ inline T operator-(const T& a) { return __hneg(a); }                         \
  __host__ __device__ inline bool operator==(const T& a, const T& b) { return __heq(a, b); }       \
  __host__ __device__ inline bool operator!=(const T& a, const T& b) { return __hneu(a, b); }      \
  __host__ __device__ inline bool operator>(const T& a, const T& b) { return __hgt(a, b); }        \
  __host__ __device__ inline bool operator<(const T& a, const T& b) { return __hlt(a, b); }        \
  __host__ __device__ inline bool operator>=(const T& a, const T& b) { return __hge(a, b); }       \
  __host__ __device__ inline bool operator<=(const T& a, const T& b) { return __hle(a, b); }

// The 2-vector T2 of T (fields x, y): lane-wise intrinsics and operators; the comparison
// operators are true when both lanes are (__hbeq2 ...).
#define VGPU_16BIT_PAIR(T2, T)                                                                     \
  __host__ __device__ inline T2 __hadd2(T2 a, T2 b) { return T2(__hadd(a.x, b.x), __hadd(a.y, b.y)); } \
  __host__ __device__ inline T2 __hsub2(T2 a, T2 b) { return T2(__hsub(a.x, b.x), __hsub(a.y, b.y)); } \
  __host__ __device__ inline T2 __hmul2(T2 a, T2 b) { return T2(__hmul(a.x, b.x), __hmul(a.y, b.y)); } \
  __host__ __device__ inline T2 __h2div(T2 a, T2 b) { return T2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); } \
  __host__ __device__ inline T2 __hneg2(T2 a) { return T2(__hneg(a.x), __hneg(a.y)); }             \
  __host__ __device__ inline T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); }             \
  __host__ __device__ inline T2 __hfma2(T2 a, T2 b, T2 c) {                                        \
    return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));                                       \
  }                                                                                                \
  __host__ __device__ inline T2 __hmax2(T2 a, T2 b) { return T2(__hmax(a.x, b.x), __hmax(a.y, b.y)); } \
  __host__ __device__ inline T2 __hmin2(T2 a, T2 b) { return T2(__hmin(a.x, b.x), __hmin(a.y, b.y)); } \
  __host__ __device__ inline bool __hbeq2(T2 a, T2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); } \
  __host__ __device__ inline bool __hbne2(T2 a, T2 b) { return __hne(a.x, b.x) && __hne(a.y, b.y); } \
  __host__ __device__ inline bool __hbneu2(T2 a, T2 b) { return __hneu(a.x, b.x) && __hneu(a.y, b.y); } \
  __host__ __device__ inline bool __hblt2(T2 a, T2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); } \
  __host__ __device__ inline bool __hble2(T2 a, T2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); } \
  __host__ __device__ inline bool __hbgt2(T2 a, T2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); } \
  __host__ __device__ inline bool __hbge2(T2 a, T2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); } \
  __host__ __device__ inline T2 operator+(const T2& a, const T2& b) { return __hadd2(a, b); }      \
  __host__ __device__ inline T2 operator-(const T2& a, const T2& b) { return __hsub2(a, b); }      \
  __host__ __device__ inline T2 operator*(const T2& a, const T2& b) { return __hmul2(a, b); }      \
  __host__ __device__ inline T2 operator/(const T2& a, const T2& b) { return __h2div(a, b); }      \
  __host__ __device__ inline T2& operator+=(T2& a, const T2& b) { return a = __hadd2(a, b); }      \
  __host__ __device__ inline T2& operator-=(T2& a, const T2& b) { return a = __hsub2(a, b); }      \
  __host__ __device__ inline T2& operator*=(T2& a, const T2& b) { return a = __hmul2(a, b); }      \
  __host__ __device__ inline T2& operator/=(T2& a, const T2& b) { return a = __h2div(a, b); }      \
  __host__ __device__ inline T2& operator++(T2& a) { return a += T2(T(1.0f), T(1.0f)); }          \
  __host__ __device__ inline T2& operator--(T2& a) { return a -= T2(T(1.0f), T(1.0f)); }          \
  __host__ __device__ inline T2 operator++(T2& a, int) {                                           \
    T2 old = a;                                                                                    \
    ++a;                                                                                           \
    return old;                                                                                    \
  }                                                                                                \
  __host__ __device__ inline T2 operator--(T2& a, int) {                                           \
    T2 old = a;                                                                                    \
    --a;                                                                                           \
    return old;                                                                                    \
  }                                                                                                \
  __host__ __device__ inline T2 operator+(const T2& a) { return a; }                               \
  __host__ __device__ inline T2 operator-(const T2& a) { return __hneg2(a); }                      \
  __host__ __device__ inline bool operator==(const T2& a, const T2& b) { return __hbeq2(a, b); }   \
  __host__ __device__ inline bool operator!=(const T2& a, const T2& b) { return __hbneu2(a, b); }  \
  __host__ __device__ inline bool operator>(const T2& a, const T2& b) { return __hbgt2(a, b); }    \
  __host__ __device__ inline bool operator<(const T2& a, const T2& b) { return __hblt2(a, b); }    \
  __host__ __device__ inline bool operator>=(const T2& a, const T2& b) { return __hbge2(a, b); }   \
  __host__ __device__ inline bool operator<=(const T2& a, const T2& b) { return __hble2(a, b); }
