// LayerNorm (one row per warp, f32 statistics) and GeLU (tanh form), forward and backward.
#include "core/backend/cuda/column_reduce.cuh"
#include "core/backend/cuda/norm_dx.cuh"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

// kAdd: x += residual first (each lane adds, stores and then reads back its own elements); without
// it x is only read. Each lane reads K elements at a time (a 16-byte pack where the rows, g and b
// allow: packs16).
template <class T, bool kAdd, int K>
__global__ void layernorm_forward_kernel(T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                                         T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ g,
                                         const T* __restrict__ b, int64_t n, int64_t c, float eps) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // whole warps leave together
  T* xr = x + row * c;
  float s = 0.0f;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_adding<kAdd, K>(xr, kAdd ? residual + row * c : nullptr, i);
    for (int k = 0; k < K; ++k) s += to_f32(xv.v[k]);
  }
  const float m = warp_sum(s) / float(c);
  float v = 0.0f;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i);
    for (int k = 0; k < K; ++k) {
      const float d = to_f32(xv.v[k]) - m;
      v += d * d;
    }
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) / float(c) + eps);
  T* yr = y + row * c;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i), gv = load_pack<K>(g + i), bv = load_pack<K>(b + i);
    Pack<T, K> out;
    for (int k = 0; k < K; ++k) out.v[k] = from_f32<T>((to_f32(xv.v[k]) - m) * rs * to_f32(gv.v[k]) + to_f32(bv.v[k]));
    store_pack<K>(yr + i, out);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// Each lane reads K elements at a time (a 16-byte pack where the rows and g allow: packs16).
template <class T, int K>
__global__ void layernorm_backward_dx_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ x,
                                             const T* __restrict__ g, const float* __restrict__ mean,
                                             const float* __restrict__ rstd, const T* __restrict__ residual,
                                             int64_t n, int64_t c) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* xr = x + row * c;
  const T* dyr = dy + row * c;
  const float m = mean[row], rs = rstd[row];
  float dmean = 0.0f, dnorm_mean = 0.0f;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i), dv = load_pack<K>(dyr + i), gv = load_pack<K>(g + i);
    for (int k = 0; k < K; ++k) {
      const float norm = (to_f32(xv.v[k]) - m) * rs;
      const float dnorm = to_f32(dv.v[k]) * to_f32(gv.v[k]);
      dmean += dnorm;
      dnorm_mean += dnorm * norm;
    }
  }
  dmean = warp_sum(dmean) / float(c);
  dnorm_mean = warp_sum(dnorm_mean) / float(c);
  T* dxr = dx + row * c;
  norm_backward_dx_row<T, K>(dxr, residual ? residual + row * c : dxr, xr, dyr, g, c, lane, m, rs, dmean, dnorm_mean);
}

// dg += dy * xhat, db += dy, per column.
template <class T> struct LayerNormParamGrads {
  using Elem = T;
  const T* dy;
  const T* x;
  const float* mean;
  const float* rstd;
  int64_t cols;
  template <int K> __device__ void add(int64_t r, int64_t c0, float (&acc)[K][2]) const {
    const Pack<T, K> d = load_pack<K>(dy + r * cols + c0), xv = load_pack<K>(x + r * cols + c0);
    const float m = mean[r], rs = rstd[r];
    for (int k = 0; k < K; ++k) {
      const float dk = to_f32(d.v[k]);
      acc[k][0] += dk * (to_f32(xv.v[k]) - m) * rs;
      acc[k][1] += dk;
    }
  }
};

constexpr float kGeluC = 0.79788456080286535588f;  // sqrt(2/pi)

template <class T> __global__ void gelu_forward_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[i]);
    const float u = kGeluC * (v + 0.044715f * v * v * v);
    y[i] = from_f32<T>(0.5f * v * (1.0f + tanhf(u)));
  }
}

template <class T> __global__ void gelu_backward_kernel(T* dx, const T* x, const T* dy, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[i]);
    const float u = kGeluC * (v + 0.044715f * v * v * v);
    const float th = tanhf(u);
    const float du = kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = from_f32<T>(to_f32(dy[i]) * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du));
  }
}

unsigned row_blocks(int64_t n) { return static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void layernorm_forward(void* y, float* mean, float* rstd, const void* x, const void* g, const void* b, DType dt,
                       int64_t n, int64_t c, float eps, cudaStream_t st) {
  add_layernorm_forward(y, mean, rstd, const_cast<void*>(x), nullptr, g, b, dt, n, c, eps, st);
}

void add_layernorm_forward(void* y, float* mean, float* rstd, void* x, const void* r, const void* g, const void* b,
                           DType dt, int64_t n, int64_t c, float eps, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "layernorm_forward", [&](auto z) {
    using T = decltype(z);
    constexpr int kP = kPack16<T>;
    T* const ty = static_cast<T*>(y);
    T* const tx = static_cast<T*>(x);
    const T* const tr = static_cast<const T*>(r);
    const T* const tg = static_cast<const T*>(g);
    const T* const tb = static_cast<const T*>(b);
    const bool packed = packs16<T>(c, {y, x, g, b, r ? r : x});
    if (r && packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_forward_kernel<T, true, kP>)
      (ty, mean, rstd, tx, tr, tg, tb, n, c, eps);
    else if (r)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_forward_kernel<T, true, 1>)
      (ty, mean, rstd, tx, tr, tg, tb, n, c, eps);
    else if (packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_forward_kernel<T, false, kP>)
      (ty, mean, rstd, tx, nullptr, tg, tb, n, c, eps);
    else
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_forward_kernel<T, false, 1>)
      (ty, mean, rstd, tx, nullptr, tg, tb, n, c, eps);
    PTDP_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
  });
}

void layernorm_backward(void* dx, float* dg, float* db, const void* dy, const void* x, const void* g,
                        const float* mean, const float* rstd, const void* residual, DType dt, int64_t n, int64_t c,
                        float* partials, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "layernorm_backward", [&](auto z) {
    using T = decltype(z);
    const bool packed = packs16<T>(c, {dx, dy, x, g, residual ? residual : dx});
    if (packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_backward_dx_kernel<T, kPack16<T>>)
      (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(g), mean, rstd,
       static_cast<const T*>(residual), n, c);
    else
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, layernorm_backward_dx_kernel<T, 1>)
      (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(g), mean, rstd,
       static_cast<const T*>(residual), n, c);
    PTDP_CUDA_CHECK_LAUNCH("layernorm_backward_dx_kernel");
    column_reduce<2>(LayerNormParamGrads<T>{static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, c}, n,
                     c, dg, db, partials, packs16<T>(c, {dy, x}), st);
  });
}

void gelu_forward(void* y, const void* x, DType dt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "gelu_forward", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, gelu_forward_kernel<T>)
    (static_cast<T*>(y), static_cast<const T*>(x), n);
    PTDP_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
  });
}

void gelu_backward(void* dx, const void* x, const void* dy, DType dt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "gelu_backward", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, gelu_backward_kernel<T>)
    (static_cast<T*>(dx), static_cast<const T*>(x), static_cast<const T*>(dy), n);
    PTDP_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
  });
}

}  // namespace ptdp::cuda
