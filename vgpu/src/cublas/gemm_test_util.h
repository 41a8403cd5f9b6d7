// Test helpers for the GEMM tests: typed column-major matrices filled with small multiples of 1/4
// (exact in bf16, f16 and f32, so every sum here is exact in f32) and a naive triple-loop reference.
#pragma once
#include <library_types.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cublas/dtype.h"
#include "cublas/gemm_core.h"

namespace vgpu::blas::testing {

// Host storage for `batch` matrices rows x cols (leading dimension ld, batch stride in elements).
struct HostMatrix {
  cudaDataType type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0, batch = 1;
  std::vector<unsigned char> bytes;

  HostMatrix() = default;
  HostMatrix(cudaDataType t, int64_t r, int64_t c, int64_t l, int64_t b = 1, int64_t s = -1)
      : type(t), rows(r), cols(c), ld(l), stride(s >= 0 ? s : l * c + 3), batch(b) {
    bytes.assign(size_t(elements()) * dtype_size(t), 0);
  }
  int64_t elements() const { return rows == 0 || cols == 0 ? 1 : (batch - 1) * stride + (cols - 1) * ld + rows; }
  int64_t index(int64_t i, int64_t r, int64_t c) const { return i * stride + c * ld + r; }
  float get(int64_t i, int64_t r, int64_t c) const { return load_f32(bytes.data(), type, index(i, r, c)); }
  void set(int64_t i, int64_t r, int64_t c, float v) { store_f32(bytes.data(), type, index(i, r, c), v); }
  // Every element (padding included) a random multiple of 1/4 in [-2, 2].
  void randomize(std::mt19937& rng) {
    std::uniform_int_distribution<int> q(-8, 8);
    for (int64_t e = 0; e < int64_t(bytes.size() / dtype_size(type)); ++e)
      store_f32(bytes.data(), type, e, float(q(rng)) / 4.0f);
  }
  void fill(float v) {
    for (int64_t e = 0; e < int64_t(bytes.size() / dtype_size(type)); ++e) store_f32(bytes.data(), type, e, v);
  }
  Matrix view() const { return Matrix{bytes.data(), type, rows, cols, ld, stride}; }
  void* data() { return bytes.data(); }
};

// Naive reference in double; D_out[i] = round_to_type(alpha op(A) op(B) + beta C + bias).
inline HostMatrix reference_gemm(const GemmProblem& p, const HostMatrix& a, const HostMatrix& b, const HostMatrix& c,
                                 const HostMatrix& d_before, const void* bias) {
  HostMatrix d = d_before;
  for (int64_t i = 0; i < p.batch; ++i)
    for (int64_t col = 0; col < p.n; ++col)
      for (int64_t row = 0; row < p.m; ++row) {
        double acc = 0;
        for (int64_t x = 0; x < p.k; ++x) {
          const double av = p.trans_a ? a.get(i, x, row) : a.get(i, row, x);
          const double bv = p.trans_b ? b.get(i, col, x) : b.get(i, x, col);
          acc += av * bv;
        }
        double v = double(p.alpha) * acc;
        if (p.beta != 0.0f) v += double(p.beta) * c.get(i, row, col);
        if (bias) v += load_f32(bias, p.bias_type, i * p.bias_stride + row);
        d.set(i, row, col, float(v));
      }
  return d;
}

}  // namespace vgpu::blas::testing
