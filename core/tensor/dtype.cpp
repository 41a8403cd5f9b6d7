#include "core/tensor/dtype.h"

#include <bit>
#include <cmath>

#include "core/common/error.h"

namespace ptdp {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
  }
  return "?";
}

DType parse_dtype(std::string_view name, std::string_view what) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32})
    if (dtype_name(t) == name) return t;
  usage_error("{} '{}' is not a dtype (f32, f64, bf16, f16, i32)", what, name);
}

bf16 float_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);  // round to nearest, ties to even
  return bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

float bf16_to_float(bf16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }

f16 float_to_f16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t mag = u & 0x7FFFFFFF;
  if (mag > 0x7F800000) return f16{static_cast<uint16_t>(sign | 0x7E00)};  // NaN
  if (mag >= 0x477FF000) return f16{static_cast<uint16_t>(sign | 0x7C00)};  // overflow -> inf
  if (mag < 0x38800000) {  // subnormal or zero in f16
    // value = mag as float; f16 subnormal unit is 2^-24.
    float v = std::bit_cast<float>(mag);
    float scaled = v * 16777216.0f;  // 2^24, exact
    uint32_t q = static_cast<uint32_t>(std::nearbyint(scaled));  // ties to even (default mode)
    return f16{static_cast<uint16_t>(sign | q)};
  }
  uint32_t exp = ((mag >> 23) - 127 + 15);
  uint32_t mant = mag & 0x7FFFFF;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half += 1;  // may carry into exponent: fine
  return f16{static_cast<uint16_t>(sign | half)};
}

float f16_to_float(f16 x) {
  uint32_t sign = (static_cast<uint32_t>(x.bits) & 0x8000) << 16;
  uint32_t exp = (x.bits >> 10) & 0x1F;
  uint32_t mant = x.bits & 0x3FF;
  if (exp == 0) {
    float v = static_cast<float>(mant) / 16777216.0f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

}  // namespace ptdp
