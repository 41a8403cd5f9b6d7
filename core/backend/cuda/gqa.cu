// Grouped-query attention's layout change: the compact QKV projection (per group: its r = a/g
// query heads, its key, its value) to the per-head q | k | v layout the attention reads, and the
// transpose for backward (keys' and values' gradients summed over the group's heads in head
// order, in f32). Same semantics as the CPU backend's (core/backend/cpu/attention.cpp).
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per element of y [n, a*3*hd].
template <class T>
__global__ void gqa_expand_kernel(T* __restrict__ y, const T* __restrict__ x, int64_t n, int a, int r, int hd) {
  const int64_t yw = int64_t(3) * a * hd, xw = int64_t(a / r) * (r + 2) * hd, total = n * yw;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = t / yw, c = t % yw;
    const int j = int(c / (3 * hd)), part = int(c / hd % 3), i = int(c % hd);
    const int64_t block = part == 0 ? j % r : r + part - 1;  // q: the head's query; k, v: the group's
    y[t] = x[row * xw + int64_t(j / r) * (r + 2) * hd + block * hd + i];
  }
}

// One thread per element of dx [n, g*(r+2)*hd].
template <class T>
__global__ void gqa_reduce_kernel(T* __restrict__ dx, const T* __restrict__ dy, int64_t n, int a, int r, int hd) {
  const int64_t yw = int64_t(3) * a * hd, xw = int64_t(a / r) * (r + 2) * hd, total = n * xw;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = t / xw, c = t % xw;
    const int k = int(c / ((r + 2) * hd)), block = int(c / hd % (r + 2)), i = int(c % hd);
    const T* yr = dy + row * yw;
    if (block < r) {
      dx[t] = yr[int64_t(k * r + block) * 3 * hd + i];
    } else {
      const int part = block - r + 1;  // 1: k, 2: v
      float s = 0.0f;
      for (int q = 0; q < r; ++q) s += to_f32(yr[int64_t(k * r + q) * 3 * hd + part * hd + i]);
      dx[t] = from_f32<T>(s);
    }
  }
}

}  // namespace

void gqa_expand(void* y, const void* x, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st) {
  const int64_t total = n * 3 * a * int64_t(hd);
  if (total == 0) return;
  dispatch_float(dt, "gqa_expand", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, gqa_expand_kernel<T>)
    (static_cast<T*>(y), static_cast<const T*>(x), n, a, a / g, hd);
    PTDP_CUDA_CHECK_LAUNCH("gqa_expand_kernel");
  });
}

void gqa_reduce(void* dx, const void* dy, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st) {
  const int64_t total = n * int64_t(a + 2 * g) * hd;
  if (total == 0) return;
  dispatch_float(dt, "gqa_reduce", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, gqa_reduce_kernel<T>)
    (static_cast<T*>(dx), static_cast<const T*>(dy), n, a, a / g, hd);
    PTDP_CUDA_CHECK_LAUNCH("gqa_reduce_kernel");
  });
}

}  // namespace ptdp::cuda
