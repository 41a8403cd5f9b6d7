// Conversions between 16-bit storage and the f32 the CPU kernels compute in, for the
// mixed-precision path of the CPU backend (bf16/f16 storage, f32 arithmetic).
#pragma once
#include "core/tensor/tensor.h"

namespace ptdp::cpu {

inline bool is_16bit(DType d) { return d == DType::BF16 || d == DType::F16; }

// An f32 copy of a bf16/f16 tensor; the tensor itself when it is f32 or f64.
Tensor widen(const Tensor& t);
// An uninitialised f32 tensor shaped like a bf16/f16 `dst`; dst itself otherwise.
Tensor working(const Tensor& dst);
// Rounds `work` into `dst` (nothing when work is dst).
void narrow(const Tensor& work, Tensor& dst);

}  // namespace ptdp::cpu
