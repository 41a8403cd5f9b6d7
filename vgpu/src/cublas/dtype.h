// Element types of the GEMM core: sizes and names of the cudaDataType values it handles, and the
// bit-exact f32 <-> bf16 / f16 conversions (round to nearest even, as the GPU's stores round).
#pragma once
#include <library_types.h>

#include <cstdint>
#include <cstring>

namespace vgpu::blas {

// Bytes per element, 0 for a type the GEMM core does not handle.
inline size_t dtype_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
      return 2;
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

inline const char* dtype_name(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F:
      return "CUDA_R_32F";
    case CUDA_R_16F:
      return "CUDA_R_16F";
    case CUDA_R_16BF:
      return "CUDA_R_16BF";
    case CUDA_R_64F:
      return "CUDA_R_64F";
    case CUDA_R_32I:
      return "CUDA_R_32I";
    default:
      return "an unsupported cudaDataType";
  }
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN (made quiet), overflow goes to infinity.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    const float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Round to nearest even, including into the subnormal range; |f| >= 65520 becomes infinity.
inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (x >= 0x38800000u) {  // a normal half
    const uint32_t mant = x & 0x7fffffu;
    uint32_t h = (((x >> 23) - 112u) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
    return uint16_t(sign | h);
  }
  if (x < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  const uint32_t exp = x >> 23;      // 102..112
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // value in units of 2^-24 is mant >> shift
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

inline float load_f32(const void* base, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_16BF:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case CUDA_R_16F:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}

inline void store_f32(void* base, cudaDataType t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_16BF:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
      break;
    case CUDA_R_16F:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(v);
      break;
    default:
      static_cast<float*>(base)[i] = v;
      break;
  }
}

}  // namespace vgpu::blas
