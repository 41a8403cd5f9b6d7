#include "core/backend/cpu/convert.h"

namespace ptdp::cpu {

namespace {

void to_f32(float* out, const Tensor& t) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::BF16) {
    const bf16* p = t.data<bf16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
  } else {
    const f16* p = t.data<f16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(p[i]);
  }
}

void from_f32(Tensor& t, const float* in) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::BF16) {
    bf16* p = t.data<bf16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = float_to_bf16(in[i]);
  } else {
    f16* p = t.data<f16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = float_to_f16(in[i]);
  }
}

}  // namespace

Tensor widen(const Tensor& t) {
  if (!t.defined() || !is_16bit(t.dtype())) return t;
  Tensor w = Tensor::empty(t.shape(), DType::F32);
  to_f32(w.data<float>(), t);
  return w;
}

Tensor working(const Tensor& dst) {
  if (!is_16bit(dst.dtype())) return dst;
  return Tensor::empty(dst.shape(), DType::F32);
}

void narrow(const Tensor& work, Tensor& dst) {
  if (work.raw() == dst.raw()) return;
  from_f32(dst, work.data<float>());
}

}  // namespace ptdp::cpu
