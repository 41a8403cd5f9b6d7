// Bias gradients: column sums of dy, accumulated into f32.
#include "core/backend/cuda/column_reduce.cuh"

namespace ptdp::cuda {
namespace {

template <class T> struct ColumnValue {
  using Elem = T;
  const T* x;
  int64_t cols;
  template <int K> __device__ void add(int64_t r, int64_t c0, float (&acc)[K][1]) const {
    const Pack<T, K> v = load_pack<K>(x + r * cols + c0);
    for (int k = 0; k < K; ++k) acc[k][0] += to_f32(v.v[k]);
  }
};

}  // namespace

int64_t column_sum_chunks(int64_t rows) {
  const int64_t chunks = (rows + 255) / 256;
  return chunks < 1 ? 1 : (chunks > 64 ? 64 : chunks);
}

void column_sum_accumulate(float* out, const void* x, DType dt, int64_t rows, int64_t cols, float* partials,
                           cudaStream_t st) {
  dispatch_float(dt, "column sum", [&](auto z) {
    using T = decltype(z);
    column_reduce<1>(ColumnValue<T>{static_cast<const T*>(x), cols}, rows, cols, out, nullptr, partials,
                     packs16<T>(cols, {x}), st);
  });
}

}  // namespace ptdp::cuda
