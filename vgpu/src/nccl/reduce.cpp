// Element-wise arithmetic of the NCCL subset: sizes of ncclDataType_t, and deterministic
// reductions over the ranks' buffers in rank order, each step in the buffers' type as NCCL's
// kernels take it (src/device/reduce_kernel.h: f16 and bf16 pairs added with __hadd2, or in f32
// and rounded back, and partial sums travel between ranks in the buffers' type), and ncclAvg of
// floating-point types as NCCL's PreMulSum (src/enqueue.cc: each input multiplied by 1/nRanks
// rounded to the type, then summed); of integers as a sum divided by nRanks (SumPostDiv).
#include "nccl/reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace vgpu::nccl {

size_t dtype_size(int dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "invalid";
  }
}

const char* redop_name(int op) {
  switch (op) {
    case ncclSum:
      return "ncclSum";
    case ncclProd:
      return "ncclProd";
    case ncclMax:
      return "ncclMax";
    case ncclMin:
      return "ncclMin";
    case ncclAvg:
      return "ncclAvg";
    default:
      return "invalid";
  }
}

bool dtype_reducible(int dtype) { return dtype_size(dtype) != 0 && dtype != ncclFloat8e4m3 && dtype != ncclFloat8e5m2; }

// ---- 16-bit floats

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // 112 = 127 - 15
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    int e = 113;  // subnormal: normalise
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (uint32_t(e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  const uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));  // inf / quiet NaN
  const int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {
    // Subnormal or zero: shift the full significand (with the implicit 1) into place.
    if (e < -10) return sign;
    const uint32_t m = mant | 0x800000u;
    const int shift = 14 - e;  // 24-bit significand -> 10-bit field at exponent 0
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent: correct
  return uint16_t(sign | r);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding) >> 16);
}

// ---- Reductions

namespace {

constexpr size_t kBlock = 256;  // elements accumulated at a time, on the stack

// Storage type S, the type A arithmetic is done in, and the conversions between them; round()
// takes a result of A back to what S can hold, as storing it would.
template <class S>
struct Plain {
  using Acc = S;
  static Acc round(Acc v) { return v; }
  static Acc load(const void* p, size_t i) {
    S v;
    std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(S), sizeof(S));
    return v;
  }
  static void store(void* p, size_t i, Acc v) { std::memcpy(static_cast<char*>(p) + i * sizeof(S), &v, sizeof(S)); }
};
struct Half {
  using Acc = float;
  static Acc round(Acc v) { return half_to_float(float_to_half(v)); }
  static Acc load(const void* p, size_t i) { return half_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, Acc v) { static_cast<uint16_t*>(p)[i] = float_to_half(v); }
};
struct Bf16 {
  using Acc = float;
  static Acc round(Acc v) { return bf16_to_float(float_to_bf16(v)); }
  static Acc load(const void* p, size_t i) { return bf16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, Acc v) { static_cast<uint16_t*>(p)[i] = float_to_bf16(v); }
};

template <class A>
A combine(int op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    switch (op) {
      case ncclSum:
      case ncclAvg:
        return A(U(a) + U(b));  // wraps, as two's complement hardware does
      case ncclProd:
        return A(U(a) * U(b));
      case ncclMax:
        return a > b ? a : b;
      default:
        return a < b ? a : b;
    }
  } else {
    switch (op) {
      case ncclSum:
      case ncclAvg:
        return a + b;
      case ncclProd:
        return a * b;
      case ncclMax:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<A>::quiet_NaN() : (a > b ? a : b);
      default:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<A>::quiet_NaN() : (a < b ? a : b);
    }
  }
}

template <class E>
void reduce_as(int op, const void* const* inputs, int n, void* out, size_t count) {
  using A = typename E::Acc;
  // ncclAvg of floating-point types: PreMulSum, each input times 1/n in the type first.
  const bool premul = op == ncclAvg && std::is_floating_point_v<A>;
  const A scale = E::round(A(1.0 / n));
  auto input = [&](int q, size_t i) {
    const A v = E::load(inputs[q], i);
    return premul ? E::round(v * scale) : v;
  };
  A acc[kBlock];
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t m = count - begin < kBlock ? count - begin : kBlock;
    for (size_t i = 0; i < m; ++i) acc[i] = input(0, begin + i);
    for (int q = 1; q < n; ++q)
      for (size_t i = 0; i < m; ++i) acc[i] = E::round(combine<A>(op, acc[i], input(q, begin + i)));
    if (op == ncclAvg && !premul)
      for (size_t i = 0; i < m; ++i) acc[i] = A(acc[i] / A(n));
    for (size_t i = 0; i < m; ++i) E::store(out, begin + i, acc[i]);
  }
}

}  // namespace

void reduce(int dtype, int op, const void* const* inputs, int n, void* out, size_t count) {
  switch (dtype) {
    case ncclInt8:
      return reduce_as<Plain<int8_t>>(op, inputs, n, out, count);
    case ncclUint8:
      return reduce_as<Plain<uint8_t>>(op, inputs, n, out, count);
    case ncclInt32:
      return reduce_as<Plain<int32_t>>(op, inputs, n, out, count);
    case ncclUint32:
      return reduce_as<Plain<uint32_t>>(op, inputs, n, out, count);
    case ncclInt64:
      return reduce_as<Plain<int64_t>>(op, inputs, n, out, count);
    case ncclUint64:
      return reduce_as<Plain<uint64_t>>(op, inputs, n, out, count);
    case ncclFloat16:
      return reduce_as<Half>(op, inputs, n, out, count);
    case ncclFloat32:
      return reduce_as<Plain<float>>(op, inputs, n, out, count);
    case ncclFloat64:
      return reduce_as<Plain<double>>(op, inputs, n, out, count);
    case ncclBfloat16:
      return reduce_as<Bf16>(op, inputs, n, out, count);
    default:
      return;  // callers check dtype_reducible first
  }
}

}  // namespace vgpu::nccl
