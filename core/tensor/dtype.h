// Element types: f32 (training on the CPU), f64 (gradient checks), bf16 and f16 (storage
// for mixed precision), i32 (token ids). Conversions round to nearest even.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ptdp {

enum class DType : uint8_t { F32, F64, BF16, F16, I32 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "f64", "bf16", "f16", "i32"
// Parses a name above; throws UsageError naming `what` (e.g. "--precision") otherwise.
DType parse_dtype(std::string_view name, std::string_view what);

// 16-bit storage types, bit patterns only; arithmetic happens in float.
struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

bf16 float_to_bf16(float x);
float bf16_to_float(bf16 x);
f16 float_to_f16(float x);
float f16_to_float(f16 x);

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<bf16>() { return DType::BF16; }
template <> constexpr DType dtype_of<f16>() { return DType::F16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }

}  // namespace ptdp
