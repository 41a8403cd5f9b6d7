// Attention's pieces besides the GEMMs: the causal softmax over the scores, in place, one row per
// warp (row r is query position i = r % s, which sees keys 0..i; the rest of the row is zero),
// and the permutation of rows between sequence order and per-head order.
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

template <class T> __global__ void causal_softmax_forward_kernel(T* p, int64_t rows, int s) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % s);
  T* pr = p + row * s;
  float mx = -INFINITY;
  for (int j = lane; j <= i; j += 32) mx = fmaxf(mx, to_f32(pr[j]));
  mx = warp_max(mx);
  float tot = 0.0f;
  for (int j = lane; j <= i; j += 32) tot += expf(to_f32(pr[j]) - mx);
  const float inv = 1.0f / warp_sum(tot);
  for (int j = lane; j < s; j += 32) pr[j] = from_f32<T>(j <= i ? expf(to_f32(pr[j]) - mx) * inv : 0.0f);
}

template <class T>
__global__ void causal_softmax_backward_kernel(T* __restrict__ dp, const T* __restrict__ p, int64_t rows, int s,
                                               float scale) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % s);
  T* dr = dp + row * s;
  const T* pr = p + row * s;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += 32) dot += to_f32(pr[j]) * to_f32(dr[j]);
  dot = warp_sum(dot);
  for (int j = lane; j < s; j += 32)
    dr[j] = from_f32<T>(j <= i ? to_f32(pr[j]) * (to_f32(dr[j]) - dot) * scale : 0.0f);
}

// Rows of w elements: [b, s, a] order (activations) <-> [b, a, s] (one batch per head). One warp
// per output row, so that the row's source is found with one set of divisions, not one per element
// (64-bit divisions per element made this kernel compute-bound), and reads and writes run along rows.
template <class T>
__global__ void permute_heads_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t s,
                                     int64_t a, int64_t w, bool to_heads) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;  // output row
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  int64_t src;
  if (to_heads) {  // r = (bi, j, i) <- (bi, i, j)
    const int64_t i = r % s, j = (r / s) % a, bi = r / (s * a);
    src = (bi * s + i) * a + j;
  } else {  // r = (bi, i, j) <- (bi, j, i)
    const int64_t j = r % a, i = (r / a) % s, bi = r / (s * a);
    src = (bi * a + j) * s + i;
  }
  const T* ir = in + src * w;
  T* orow = out + r * w;
  for (int64_t e = lane; e < w; e += 32) orow[e] = ir[e];
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void permute_heads(void* out, const void* in, DType dt, int64_t b, int64_t s, int64_t a, int64_t w, bool to_heads,
                   cudaStream_t st) {
  const int64_t n = b * s * a * w;
  if (n == 0) return;
  dispatch_float(dt, "attention permute", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(row_blocks(b * s * a), kThreads, 0, st, permute_heads_kernel<T>)
    (static_cast<T*>(out), static_cast<const T*>(in), b * s * a, s, a, w, to_heads);
    PTDP_CUDA_CHECK_LAUNCH("permute_heads_kernel");
  });
}

void causal_softmax_forward(void* p, DType dt, int64_t rows, int s, cudaStream_t st) {
  if (rows == 0) return;
  dispatch_float(dt, "attention softmax", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(row_blocks(rows), kThreads, 0, st, causal_softmax_forward_kernel<T>)(static_cast<T*>(p), rows, s);
    PTDP_CUDA_CHECK_LAUNCH("causal_softmax_forward_kernel");
  });
}

void causal_softmax_backward(void* dp, const void* p, DType dt, int64_t rows, int s, float scale, cudaStream_t st) {
  if (rows == 0) return;
  dispatch_float(dt, "attention softmax backward", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(row_blocks(rows), kThreads, 0, st, causal_softmax_backward_kernel<T>)
    (static_cast<T*>(dp), static_cast<const T*>(p), rows, s, scale);
    PTDP_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  });
}

}  // namespace ptdp::cuda
