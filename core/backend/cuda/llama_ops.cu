// LLaMA's operations: RMSNorm (one row per warp, f32 rstd; dg by column sums in a fixed order),
// rotary embeddings (Megatron's non-interleaved halves, cos/sin from a table computed in f64) and
// SwiGLU, forward and backward. Same semantics as the CPU backend's (core/backend/cpu/llama_ops.cpp).
#include "core/backend/cuda/column_reduce.cuh"
#include "core/backend/cuda/norm_dx.cuh"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

unsigned row_blocks(int64_t n) { return static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock); }

// y = x · rstd · g, rstd = 1/sqrt(mean(x²) + eps) per row. Each lane reads K elements at a time (a
// 16-byte pack where the rows and g allow: packs16).
template <class T, bool kAdd, int K>  // kAdd: x += residual first, as LayerNorm's
__global__ void rmsnorm_forward_kernel(T* __restrict__ y, float* __restrict__ rstd, T* __restrict__ x,
                                       const T* __restrict__ residual, const T* __restrict__ g, int64_t n, int64_t c,
                                       float eps) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // whole warps leave together
  T* xr = x + row * c;
  float ss = 0.0f;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_adding<kAdd, K>(xr, kAdd ? residual + row * c : nullptr, i);
    for (int k = 0; k < K; ++k) ss += to_f32(xv.v[k]) * to_f32(xv.v[k]);
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / float(c) + eps);
  T* yr = y + row * c;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i), gv = load_pack<K>(g + i);
    Pack<T, K> out;
    for (int k = 0; k < K; ++k) out.v[k] = from_f32<T>(to_f32(xv.v[k]) * rs * to_f32(gv.v[k]));
    store_pack<K>(yr + i, out);
  }
  if (lane == 0) rstd[row] = rs;
}

// With u = x·rstd and e = dy·g: dx += rstd · (e − u · mean(e·u)), or dx = residual + ... . Each lane
// reads K elements at a time (a 16-byte pack where the rows and g allow: packs16).
template <class T, int K>
__global__ void rmsnorm_backward_dx_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ x,
                                           const T* __restrict__ g, const float* __restrict__ rstd,
                                           const T* __restrict__ residual, int64_t n, int64_t c) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* xr = x + row * c;
  const T* dyr = dy + row * c;
  const float rs = rstd[row];
  float eu = 0.0f;
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i), dv = load_pack<K>(dyr + i), gv = load_pack<K>(g + i);
    for (int k = 0; k < K; ++k) eu += to_f32(dv.v[k]) * to_f32(gv.v[k]) * to_f32(xv.v[k]) * rs;
  }
  eu = warp_sum(eu) / float(c);
  T* dxr = dx + row * c;
  norm_backward_dx_row<T, K>(dxr, residual ? residual + row * c : dxr, xr, dyr, g, c, lane, 0.0f, rs, 0.0f, eu);
}

// dg += dy · x · rstd, per column.
template <class T> struct RmsNormWeightGrad {
  using Elem = T;
  const T* dy;
  const T* x;
  const float* rstd;
  int64_t cols;
  template <int K> __device__ void add(int64_t r, int64_t c0, float (&acc)[K][1]) const {
    const Pack<T, K> d = load_pack<K>(dy + r * cols + c0), xv = load_pack<K>(x + r * cols + c0);
    const float rs = rstd[r];
    for (int k = 0; k < K; ++k) acc[k][0] += to_f32(d.v[k]) * (to_f32(xv.v[k]) * rs);
  }
};

// table [2, s, hd/2]: cos, then sin, of pos · theta^(−2i/hd), computed in f64 and rounded once
// to f32 (the CPU backend's values exactly).
__global__ void rope_table_kernel(float* table, int s, int hd, double theta) {
  const int half = hd / 2;
  const int64_t total = int64_t(s) * half;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const double pos = double(t / half);
    const double ang = pos * pow(theta, -2.0 * i / hd);
    table[t] = static_cast<float>(cos(ang));
    table[total + t] = static_cast<float>(sin(ang));
  }
}

// One thread per (row, head, i < hd/2): q's pair (i, i + hd/2), k's pair, and v's two elements.
// Each thread reads and writes only its own elements, so y may be x.
template <class T>
__global__ void rope_kernel(T* y, const T* x, const float* table, int64_t n, int s, int a, int hd, float sign) {
  const int half = hd / 2;
  const int64_t total = n * a * half, width = int64_t(3) * a * hd, plane = int64_t(s) * half;
  const bool copy_v = y != x;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int64_t rh = t / half;
    const int h = static_cast<int>(rh % a);
    const int64_t r = rh / a;
    const int64_t k = (r % s) * half + i;
    const float cs = table[k], sn = sign * table[plane + k];
    const int64_t base = r * width + int64_t(h) * 3 * hd + i;
    for (int part = 0; part < 2; ++part) {  // q, k
      const int64_t o = base + int64_t(part) * hd;
      const float x0 = to_f32(x[o]), x1 = to_f32(x[o + half]);
      y[o] = from_f32<T>(x0 * cs - x1 * sn);
      y[o + half] = from_f32<T>(x1 * cs + x0 * sn);
    }
    if (copy_v) {
      const int64_t o = base + 2 * int64_t(hd);
      y[o] = x[o];
      y[o + half] = x[o + half];
    }
  }
}

// x [n, 2f] = gate | up; y [n, f] = silu(gate) · up.
template <class T, int K> __global__ void swiglu_forward_kernel(T* y, const T* x, int64_t n, int64_t f) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* gr = x + r * 2 * f;
    T* yr = y + r * f;
    for (int64_t i = int64_t(threadIdx.x) * K; i < f; i += int64_t(blockDim.x) * K) {
      const Pack<T, K> gv = load_pack<K>(gr + i), uv = load_pack<K>(gr + f + i);
      Pack<T, K> out;
      for (int k = 0; k < K; ++k) {
        const float g = to_f32(gv.v[k]), u = to_f32(uv.v[k]);
        out.v[k] = from_f32<T>(g / (1.0f + expf(-g)) * u);
      }
      store_pack<K>(yr + i, out);
    }
  }
}

// dgate = dy·up·σ(g)·(1 + g·(1 − σ(g))), dup = dy·silu(g); dx overwritten.
template <class T, int K>
__global__ void swiglu_backward_kernel(T* dx, const T* x, const T* dy, int64_t n, int64_t f) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * 2 * f;
    const T* dyr = dy + r * f;
    T* dxr = dx + r * 2 * f;
    for (int64_t i = int64_t(threadIdx.x) * K; i < f; i += int64_t(blockDim.x) * K) {
      const Pack<T, K> gv = load_pack<K>(xr + i), uv = load_pack<K>(xr + f + i), dv = load_pack<K>(dyr + i);
      Pack<T, K> dg, du;
      for (int k = 0; k < K; ++k) {
        const float g = to_f32(gv.v[k]), u = to_f32(uv.v[k]), d = to_f32(dv.v[k]);
        const float sg = 1.0f / (1.0f + expf(-g));
        dg.v[k] = from_f32<T>(d * u * sg * (1.0f + g * (1.0f - sg)));
        du.v[k] = from_f32<T>(d * g * sg);
      }
      store_pack<K>(dxr + i, dg);
      store_pack<K>(dxr + f + i, du);
    }
  }
}

}  // namespace

void rmsnorm_forward(void* y, float* rstd, const void* x, const void* g, DType dt, int64_t n, int64_t c, float eps,
                     cudaStream_t st) {
  add_rmsnorm_forward(y, rstd, const_cast<void*>(x), nullptr, g, dt, n, c, eps, st);
}

void add_rmsnorm_forward(void* y, float* rstd, void* x, const void* r, const void* g, DType dt, int64_t n, int64_t c,
                         float eps, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "rmsnorm_forward", [&](auto z) {
    using T = decltype(z);
    constexpr int kP = kPack16<T>;
    T* const ty = static_cast<T*>(y);
    T* const tx = static_cast<T*>(x);
    const T* const tr = static_cast<const T*>(r);
    const T* const tg = static_cast<const T*>(g);
    const bool packed = packs16<T>(c, {y, x, g, r ? r : x});
    if (r && packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_forward_kernel<T, true, kP>)(ty, rstd, tx, tr, tg, n, c, eps);
    else if (r)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_forward_kernel<T, true, 1>)(ty, rstd, tx, tr, tg, n, c, eps);
    else if (packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_forward_kernel<T, false, kP>)
      (ty, rstd, tx, nullptr, tg, n, c, eps);
    else
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_forward_kernel<T, false, 1>)
      (ty, rstd, tx, nullptr, tg, n, c, eps);
    PTDP_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
  });
}

void rmsnorm_backward(void* dx, float* dg, const void* dy, const void* x, const void* g, const float* rstd,
                      const void* residual, DType dt, int64_t n, int64_t c, float* partials, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "rmsnorm_backward", [&](auto z) {
    using T = decltype(z);
    const bool packed = packs16<T>(c, {dx, dy, x, g, residual ? residual : dx});
    if (packed)
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_backward_dx_kernel<T, kPack16<T>>)
      (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(g), rstd,
       static_cast<const T*>(residual), n, c);
    else
      PTDP_LAUNCH(row_blocks(n), kThreads, 0, st, rmsnorm_backward_dx_kernel<T, 1>)
      (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(g), rstd,
       static_cast<const T*>(residual), n, c);
    PTDP_CUDA_CHECK_LAUNCH("rmsnorm_backward_dx_kernel");
    column_reduce<1>(RmsNormWeightGrad<T>{static_cast<const T*>(dy), static_cast<const T*>(x), rstd, c}, n, c, dg,
                     nullptr, partials, packs16<T>(c, {dy, x}), st);
  });
}

void rope_table(float* table, int s, int hd, double theta, cudaStream_t st) {
  const int64_t total = int64_t(s) * (hd / 2);
  if (total == 0) return;
  PTDP_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, rope_table_kernel)(table, s, hd, theta);
  PTDP_CUDA_CHECK_LAUNCH("rope_table_kernel");
}

void rope(void* y, const void* x, const float* table, DType dt, int64_t n, int s, int a, int hd, bool inverse,
          cudaStream_t st) {
  const int64_t total = n * a * (hd / 2);
  if (total == 0) return;
  dispatch_float(dt, "rope", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, rope_kernel<T>)
    (static_cast<T*>(y), static_cast<const T*>(x), table, n, s, a, hd, inverse ? -1.0f : 1.0f);
    PTDP_CUDA_CHECK_LAUNCH("rope_kernel");
  });
}

void swiglu_forward(void* y, const void* x, DType dt, int64_t n, int64_t f, cudaStream_t st) {
  if (n * f == 0) return;
  dispatch_float(dt, "swiglu_forward", [&](auto z) {
    using T = decltype(z);
    T* const ty = static_cast<T*>(y);
    const T* const tx = static_cast<const T*>(x);
    if (packs16<T>(f, {y, x}))
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, swiglu_forward_kernel<T, kPack16<T>>)(ty, tx, n, f);
    else
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, swiglu_forward_kernel<T, 1>)(ty, tx, n, f);
    PTDP_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
  });
}

void swiglu_backward(void* dx, const void* x, const void* dy, DType dt, int64_t n, int64_t f, cudaStream_t st) {
  if (n * f == 0) return;
  dispatch_float(dt, "swiglu_backward", [&](auto z) {
    using T = decltype(z);
    T* const tdx = static_cast<T*>(dx);
    const T *const tx = static_cast<const T*>(x), *const tdy = static_cast<const T*>(dy);
    if (packs16<T>(f, {dx, x, dy}))
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, swiglu_backward_kernel<T, kPack16<T>>)(tdx, tx, tdy, n, f);
    else
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, swiglu_backward_kernel<T, 1>)(tdx, tx, tdy, n, f);
    PTDP_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
  });
}

}  // namespace ptdp::cuda
