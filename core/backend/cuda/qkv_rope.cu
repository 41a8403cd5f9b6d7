// The fused QKV projection split into q, k and v (and the transpose, qkv_join), and rotary
// embedding of rows at given positions (rope_rows). Same semantics as the CPU backend's
// (core/backend/cpu/block_attention.cpp).
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256, kSegmentsPerBlock = kThreads / 32;

// One warp per segment of hd elements of the fused row (row, group, block < r + 2): the fused row is
// those segments in order, so segment `seg` starts at qkv + seg * hd.
__device__ __forceinline__ int64_t part_offset(int64_t seg, int a, int g, int hd, int* part) {
  const int r = a / g;
  const int64_t row = seg / (a + 2 * g);
  const int rem = int(seg - row * (a + 2 * g)), gi = rem / (r + 2), blk = rem % (r + 2);
  if (blk < r) {
    *part = 0;
    return row * int64_t(a) * hd + int64_t(gi * r + blk) * hd;
  }
  *part = blk - r + 1;  // 1: k, 2: v
  return row * int64_t(g) * hd + int64_t(gi) * hd;
}

template <class T>
__global__ void qkv_split_kernel(T* __restrict__ q, T* __restrict__ k, T* __restrict__ v, const T* __restrict__ qkv,
                                 int64_t n, int a, int g, int hd) {
  const int64_t seg = blockIdx.x * int64_t(kSegmentsPerBlock) + threadIdx.x / 32;
  if (seg >= n * (a + 2 * g)) return;
  const int lane = threadIdx.x % 32;
  int part = 0;
  const int64_t o = part_offset(seg, a, g, hd, &part);
  T* dst = (part == 0 ? q : part == 1 ? k : v) + o;
  const T* src = qkv + seg * hd;
  for (int i = lane; i < hd; i += 32) dst[i] = src[i];
}

template <class T>
__global__ void qkv_join_kernel(T* __restrict__ dqkv, const T* __restrict__ dq, const T* __restrict__ dk,
                                const T* __restrict__ dv, int64_t n, int a, int g, int hd) {
  const int64_t seg = blockIdx.x * int64_t(kSegmentsPerBlock) + threadIdx.x / 32;
  if (seg >= n * (a + 2 * g)) return;
  const int lane = threadIdx.x % 32;
  int part = 0;
  const int64_t o = part_offset(seg, a, g, hd, &part);
  const T* src = (part == 0 ? dq : part == 1 ? dk : dv) + o;
  T* dst = dqkv + seg * hd;
  for (int i = lane; i < hd; i += 32) dst[i] = src[i];
}

// One thread per (row, i < hd/2): the angle positions[row] * theta^(-2i/hd) in f64, cos and sin
// rounded to f32 (the CPU backend's values), then pair (i, i + hd/2) of every head rotated. Each
// thread reads and writes only its own elements, so y may be x.
template <class T>
__global__ void rope_rows_kernel(T* y, const T* x, const int32_t* __restrict__ positions, int64_t n, int heads, int hd,
                                 double theta, float sign) {
  const int half = hd / 2;
  const int64_t total = n * half, width = int64_t(heads) * hd;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int64_t row = t / half;
    const double ang = double(positions[row]) * pow(theta, -2.0 * i / hd);
    const float cs = static_cast<float>(cos(ang)), sn = sign * static_cast<float>(sin(ang));
    for (int h = 0; h < heads; ++h) {
      const int64_t o = row * width + int64_t(h) * hd + i;
      const float x0 = to_f32(x[o]), x1 = to_f32(x[o + half]);
      y[o] = from_f32<T>(x0 * cs - x1 * sn);
      y[o + half] = from_f32<T>(x1 * cs + x0 * sn);
    }
  }
}

unsigned segment_blocks(int64_t segments) {
  return static_cast<unsigned>((segments + kSegmentsPerBlock - 1) / kSegmentsPerBlock);
}

}  // namespace

void qkv_split(void* q, void* k, void* v, const void* qkv, DType dt, int64_t n, int a, int g, int hd,
               cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "qkv_split", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(segment_blocks(n * (a + 2 * g)), kThreads, 0, st, qkv_split_kernel<T>)
    (static_cast<T*>(q), static_cast<T*>(k), static_cast<T*>(v), static_cast<const T*>(qkv), n, a, g, hd);
    PTDP_CUDA_CHECK_LAUNCH("qkv_split_kernel");
  });
}

void qkv_join(void* dqkv, const void* dq, const void* dk, const void* dv, DType dt, int64_t n, int a, int g, int hd,
              cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "qkv_join", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(segment_blocks(n * (a + 2 * g)), kThreads, 0, st, qkv_join_kernel<T>)
    (static_cast<T*>(dqkv), static_cast<const T*>(dq), static_cast<const T*>(dk), static_cast<const T*>(dv), n, a,
     g, hd);
    PTDP_CUDA_CHECK_LAUNCH("qkv_join_kernel");
  });
}

void rope_rows(void* y, const void* x, const int32_t* positions, DType dt, int64_t n, int heads, int hd, double theta,
               bool inverse, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "rope_rows", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(n * (hd / 2), kThreads), kThreads, 0, st, rope_rows_kernel<T>)
    (static_cast<T*>(y), static_cast<const T*>(x), positions, n, heads, hd, theta, inverse ? -1.0f : 1.0f);
    PTDP_CUDA_CHECK_LAUNCH("rope_rows_kernel");
  });
}

}  // namespace ptdp::cuda
