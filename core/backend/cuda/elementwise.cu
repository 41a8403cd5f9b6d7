// Element-wise kernels: fill, dtype conversion, add, scale, f64 sums, AdamW, bias broadcast.
#include <cmath>

#include "core/backend/cuda/adamw.cuh"
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;

template <class T> __global__ void fill_kernel(T* x, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

template <class D, class S> __global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = from_f32<D>(to_f32(src[i]));
}

// add (add_ is add with y = a) and scale_: each thread reads and writes K elements at a time (a
// 16-byte pack where n and the arrays' alignment allow: packs16).
template <class T, int K> __global__ void add_kernel(T* y, const T* a, const T* b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * K;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * K; i < n; i += stride) {
    const Pack<T, K> av = load_pack<K>(a + i), bv = load_pack<K>(b + i);
    Pack<T, K> out;
    for (int k = 0; k < K; ++k) out.v[k] = from_f32<T>(to_f32(av.v[k]) + to_f32(bv.v[k]));
    store_pack<K>(y + i, out);
  }
}

// y = a + b, y = a allowed (add_).
template <class T> void launch_add(T* y, const T* a, const T* b, int64_t n, cudaStream_t st) {
  constexpr int kP = kPack16<T>;
  if (packs16<T>(n, {y, a, b}))
    PTDP_LAUNCH(grid_for(n / kP, kThreads), kThreads, 0, st, add_kernel<T, kP>)(y, a, b, n);
  else
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, add_kernel<T, 1>)(y, a, b, n);
  PTDP_CUDA_CHECK_LAUNCH("add_kernel");
}

template <class T, int K> __global__ void scale_kernel(T* y, float alpha, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * K;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * K; i < n; i += stride) {
    Pack<T, K> yv = load_pack<K>(y + i);
    for (int k = 0; k < K; ++k) yv.v[k] = from_f32<T>(to_f32(yv.v[k]) * alpha);
    store_pack<K>(y + i, yv);
  }
}

template <class T, bool kSquares> __global__ void sum_partial_kernel(double* partials, const T* x, int64_t n) {
  double acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = to_f32(x[i]);
    acc += kSquares ? v * v : v;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void sum_finish_kernel(double* out, const double* partials, int count) {
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *out = acc;
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
                             float eps, float decay, float c1, float c2) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw_element(pi, g[i], mi, vi, lr, b1, b2, eps, decay, c1, c2);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
  }
}

template <class T> __global__ void bias_broadcast_kernel(T* y, const T* bias, int64_t m, int64_t n, int64_t ld) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < m * n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = k / m, i = k % m;
    y[j * ld + i] = bias[i];
  }
}

}  // namespace

void fill(void* x, DType dt, int64_t n, double value, cudaStream_t st) {
  if (n == 0) return;
  if (value == 0 && !std::signbit(value)) {
    PTDP_CUDA_CHECK(cudaMemsetAsync(x, 0, size_t(n) * dtype_size(dt), st));
    return;
  }
  if (dt == DType::I32) {
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, fill_kernel<int32_t>)
    (static_cast<int32_t*>(x), n, static_cast<int32_t>(value));
    PTDP_CUDA_CHECK_LAUNCH("fill_kernel<i32>");
    return;
  }
  dispatch_float(dt, "fill", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, fill_kernel<T>)
    (static_cast<T*>(x), n, from_f32<T>(static_cast<float>(value)));
    PTDP_CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

void convert(void* dst, DType dst_dt, const void* src, DType src_dt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dst_dt, "copy", [&](auto zd) {
    dispatch_float(src_dt, "copy", [&](auto zs) {
      using D = decltype(zd);
      using S = decltype(zs);
      PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, convert_kernel<D, S>)
      (static_cast<D*>(dst), static_cast<const S*>(src), n);
      PTDP_CUDA_CHECK_LAUNCH("convert_kernel");
    });
  });
}

void add(void* y, const void* a, const void* b, DType dt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "add", [&](auto z) {
    using T = decltype(z);
    launch_add(static_cast<T*>(y), static_cast<const T*>(a), static_cast<const T*>(b), n, st);
  });
}

void add_inplace(void* y, const void* x, DType dt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "add_", [&](auto z) {
    using T = decltype(z);
    launch_add(static_cast<T*>(y), static_cast<const T*>(y), static_cast<const T*>(x), n, st);
  });
}

void scale_inplace(void* y, DType dt, double alpha, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "scale_", [&](auto z) {
    using T = decltype(z);
    T* const ty = static_cast<T*>(y);
    if (packs16<T>(n, {y}))
      PTDP_LAUNCH(grid_for(n / kPack16<T>, kThreads), kThreads, 0, st, scale_kernel<T, kPack16<T>>)
      (ty, static_cast<float>(alpha), n);
    else
      PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, scale_kernel<T, 1>)(ty, static_cast<float>(alpha), n);
    PTDP_CUDA_CHECK_LAUNCH("scale_kernel");
  });
}

void sum(double* out, const void* x, DType dt, int64_t n, bool squares, double* partials, cudaStream_t st) {
  // Each thread sums at least kSumItems elements (its loads stay in flight together, and the
  // block reductions, a tree of barriers and shuffles per block, are amortised over them); at
  // most kSumPartials blocks, about one full wave of 256-thread blocks on an H100 or H200.
  constexpr int64_t kSumItems = 8;
  int64_t blocks = (n + kThreads * kSumItems - 1) / (kThreads * kSumItems);
  if (blocks < 1) blocks = 1;
  if (blocks > kSumPartials) blocks = kSumPartials;
  dispatch_float(dt, "sum", [&](auto z) {
    using T = decltype(z);
    if (squares)
      PTDP_LAUNCH(unsigned(blocks), kThreads, 0, st, sum_partial_kernel<T, true>)(partials, static_cast<const T*>(x), n);
    else
      PTDP_LAUNCH(unsigned(blocks), kThreads, 0, st, sum_partial_kernel<T, false>)(partials, static_cast<const T*>(x), n);
    PTDP_CUDA_CHECK_LAUNCH("sum_partial_kernel");
  });
  PTDP_LAUNCH(1, kThreads, 0, st, sum_finish_kernel)(out, partials, int(blocks));  // at most 4 partials a thread
  PTDP_CUDA_CHECK_LAUNCH("sum_finish_kernel");
}

void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps,
           float decay, float c1, float c2, cudaStream_t st) {
  if (n == 0) return;
  PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, adamw_kernel)
  (p, g, m, v, n, lr, beta1, beta2, eps, decay, c1, c2);
  PTDP_CUDA_CHECK_LAUNCH("adamw_kernel");
}

void bias_broadcast(void* y, const void* bias, DType dt, int64_t m, int64_t n, int64_t ld, cudaStream_t st) {
  if (m == 0 || n == 0) return;
  dispatch_float(dt, "linear bias", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(m * n, kThreads), kThreads, 0, st, bias_broadcast_kernel<T>)
    (static_cast<T*>(y), static_cast<const T*>(bias), m, n, ld);
    PTDP_CUDA_CHECK_LAUNCH("bias_broadcast_kernel");
  });
}

}  // namespace ptdp::cuda
