// Column sums over the rows of a [rows, cols] matrix in a fixed order (deterministic, no
// atomics): blocks of 32 x K columns x 8 row lanes write one partial per chunk of rows, then a
// second kernel adds the partials of each column, in chunk order, into the output.
// A functor f with `using Elem = T` (the matrix's element type) and
//   template <int K> void add(int64_t r, int64_t c0, float (&acc)[K][N]) const
// adds the values of elements (r, c0 ... c0 + K - 1) to acc. Each column's sum is the same, in the
// same order, whether its thread reads K = 1 element a row or a 16-byte pack (`packed`: every row
// of the functor's matrices starts 16-byte aligned and cols is a multiple of the pack).
#pragma once
#include <cstdint>

#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {

template <int N, int K, class F>
__global__ void column_partial_kernel(F f, int64_t rows, int64_t cols, int64_t rows_per_chunk, float* partials) {
  __shared__ float sh[N][8][32 * K + 1];
  const int64_t c0 = (blockIdx.x * int64_t(32) + threadIdx.x) * K;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float acc[K][N];
  for (int k = 0; k < K; ++k)
    for (int o = 0; o < N; ++o) acc[k][o] = 0.0f;
  if (c0 < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) f.template add<K>(r, c0, acc);
  for (int k = 0; k < K; ++k)
    for (int o = 0; o < N; ++o) sh[o][threadIdx.y][threadIdx.x * K + k] = acc[k][o];
  __syncthreads();
  if (threadIdx.y == 0 && c0 < cols)
    for (int k = 0; k < K; ++k)
      for (int o = 0; o < N; ++o) {
        float s = 0.0f;
        for (int y = 0; y < 8; ++y) s += sh[o][y][threadIdx.x * K + k];
        partials[(o * int64_t(gridDim.y) + chunk) * cols + c0 + k] = s;
      }
}

template <int N>
__global__ void column_finish_kernel(float* out0, float* out1, const float* partials, int64_t chunks, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x)
    for (int o = 0; o < N; ++o) {
      float s = 0.0f;
      for (int64_t k = 0; k < chunks; ++k) s += partials[(o * chunks + k) * cols + c];
      float* out = o == 0 ? out0 : out1;
      out[c] += s;
    }
}

// out_o[c] += sum over rows of f's o-th value; partials: N * column_sum_chunks(rows) * cols floats.
template <int N, class F>
void column_reduce(F f, int64_t rows, int64_t cols, float* out0, float* out1, float* partials, bool packed,
                   cudaStream_t st) {
  if (rows == 0 || cols == 0) return;
  const int64_t chunks = column_sum_chunks(rows);
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  constexpr int kP = kPack16<typename F::Elem>;
  if (packed) {
    const dim3 grid(static_cast<unsigned>((cols / kP + 31) / 32), static_cast<unsigned>(chunks));
    PTDP_LAUNCH(grid, dim3(32, 8), 0, st, column_partial_kernel<N, kP, F>)(f, rows, cols, per_chunk, partials);
  } else {
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
    PTDP_LAUNCH(grid, dim3(32, 8), 0, st, column_partial_kernel<N, 1, F>)(f, rows, cols, per_chunk, partials);
  }
  PTDP_CUDA_CHECK_LAUNCH("column_partial_kernel");
  PTDP_LAUNCH(grid_for(cols, 256), 256, 0, st, column_finish_kernel<N>)(out0, out1, partials, chunks, cols);
  PTDP_CUDA_CHECK_LAUNCH("column_finish_kernel");
}

}  // namespace ptdp::cuda
