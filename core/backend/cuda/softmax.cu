// Causal softmax over the attention scores, in place, one row per warp: row r is query
// position i = r % s, which sees keys 0..i; the rest of the row is zero.
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
__global__ void causal_softmax_backward_kernel(T* dp, const T* p, int64_t rows, int s, float scale) {
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

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void causal_softmax_forward(void* p, DType dt, int64_t rows, int s, cudaStream_t st) {
  if (rows == 0) return;
  dispatch_float(dt, "attention softmax", [&](auto z) {
    using T = decltype(z);
    causal_softmax_forward_kernel<T><<<row_blocks(rows), kThreads, 0, st>>>(static_cast<T*>(p), rows, s);
    PTDP_CUDA_CHECK_LAUNCH("causal_softmax_forward_kernel");
  });
}

void causal_softmax_backward(void* dp, const void* p, DType dt, int64_t rows, int s, float scale, cudaStream_t st) {
  if (rows == 0) return;
  dispatch_float(dt, "attention softmax backward", [&](auto z) {
    using T = decltype(z);
    causal_softmax_backward_kernel<T><<<row_blocks(rows), kThreads, 0, st>>>(static_cast<T*>(dp),
                                                                             static_cast<const T*>(p), rows, s, scale);
    PTDP_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  });
}

}  // namespace ptdp::cuda
