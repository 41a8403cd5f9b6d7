// Grouped-query attention's layout change: the compact QKV projection (per group: its r = a/g
// query heads, its key, its value) to the per-head q | k | v layout the attention reads, and the
// transpose for backward (keys' and values' gradients summed over the group's heads in head
// order, in f32). Same semantics as the CPU backend's (core/backend/cpu/attention.cpp).
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256, kSegmentsPerBlock = kThreads / 32;

// One warp per output segment (hd contiguous elements of one head's q, k or v), so that the
// segment's source is found with one set of divisions, not one per element (64-bit divisions per
// element made the first version run at a tenth of HBM bandwidth on an H200), and the lanes read
// and write along it, K elements at a time (16-byte packs where hd and the alignment allow: a
// lane's 2-byte loads left the second version at half of HBM's bandwidth).
template <class T, int K>
__global__ void gqa_expand_kernel(T* __restrict__ y, const T* __restrict__ x, int64_t n, int a, int r, int hd) {
  const int64_t seg = blockIdx.x * int64_t(kSegmentsPerBlock) + threadIdx.x / 32;  // (row, head j, part)
  if (seg >= n * 3 * a) return;
  const int lane = threadIdx.x % 32;
  const int64_t row = seg / (3 * a);
  const int rem = int(seg - row * 3 * a), j = rem / 3, part = rem % 3;
  const int block = part == 0 ? j % r : r + part - 1;  // q: the head's query; k, v: the group's
  const int64_t xw = int64_t(a / r) * (r + 2) * hd;
  const T* src = x + row * xw + (int64_t(j / r) * (r + 2) + block) * hd;
  T* dst = y + seg * hd;
  for (int i = lane * K; i < hd; i += 32 * K) store_pack<K>(dst + i, load_pack<K>(src + i));
}

// One warp per segment of dx [n, g, r+2, hd]: a query head's gradient is copied, a key's or a
// value's is the sum over the group's r heads, in head order, in f32; K elements at a time as the
// expand.
template <class T, int K>
__global__ void gqa_reduce_kernel(T* __restrict__ dx, const T* __restrict__ dy, int64_t n, int a, int r, int hd) {
  const int g = a / r;
  const int64_t seg = blockIdx.x * int64_t(kSegmentsPerBlock) + threadIdx.x / 32;  // (row, group k, block)
  if (seg >= n * g * (r + 2)) return;
  const int lane = threadIdx.x % 32;
  const int64_t row = seg / (g * (r + 2));
  const int rem = int(seg - row * g * (r + 2)), k = rem / (r + 2), block = rem % (r + 2);
  const T* yr = dy + row * 3 * a * int64_t(hd);
  T* dst = dx + seg * hd;
  if (block < r) {
    const T* src = yr + int64_t(k * r + block) * 3 * hd;
    for (int i = lane * K; i < hd; i += 32 * K) store_pack<K>(dst + i, load_pack<K>(src + i));
    return;
  }
  const int part = block - r + 1;  // 1: k, 2: v
  for (int i = lane * K; i < hd; i += 32 * K) {
    float s[K];
    for (int e = 0; e < K; ++e) s[e] = 0.0f;
    for (int q = 0; q < r; ++q) {
      const Pack<T, K> v = load_pack<K>(yr + int64_t(k * r + q) * 3 * hd + part * hd + i);
      for (int e = 0; e < K; ++e) s[e] += to_f32(v.v[e]);
    }
    Pack<T, K> out;
    for (int e = 0; e < K; ++e) out.v[e] = from_f32<T>(s[e]);
    store_pack<K>(dst + i, out);
  }
}

unsigned segment_blocks(int64_t segments) {
  return static_cast<unsigned>((segments + kSegmentsPerBlock - 1) / kSegmentsPerBlock);
}

}  // namespace

void gqa_expand(void* y, const void* x, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st) {
  const int64_t total = n * 3 * a * int64_t(hd);
  if (total == 0) return;
  dispatch_float(dt, "gqa_expand", [&](auto z) {
    using T = decltype(z);
    T* const ty = static_cast<T*>(y);
    const T* const tx = static_cast<const T*>(x);
    const unsigned blocks = segment_blocks(n * 3 * a);
    if (packs16<T>(hd, {y, x}))
      PTDP_LAUNCH(blocks, kThreads, 0, st, gqa_expand_kernel<T, kPack16<T>>)(ty, tx, n, a, a / g, hd);
    else
      PTDP_LAUNCH(blocks, kThreads, 0, st, gqa_expand_kernel<T, 1>)(ty, tx, n, a, a / g, hd);
    PTDP_CUDA_CHECK_LAUNCH("gqa_expand_kernel");
  });
}

void gqa_reduce(void* dx, const void* dy, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st) {
  const int64_t total = n * int64_t(a + 2 * g) * hd;
  if (total == 0) return;
  dispatch_float(dt, "gqa_reduce", [&](auto z) {
    using T = decltype(z);
    T* const tdx = static_cast<T*>(dx);
    const T* const tdy = static_cast<const T*>(dy);
    const unsigned blocks = segment_blocks(n * (a + 2 * g));
    if (packs16<T>(hd, {dx, dy}))
      PTDP_LAUNCH(blocks, kThreads, 0, st, gqa_reduce_kernel<T, kPack16<T>>)(tdx, tdy, n, a, a / g, hd);
    else
      PTDP_LAUNCH(blocks, kThreads, 0, st, gqa_reduce_kernel<T, 1>)(tdx, tdy, n, a, a / g, hd);
    PTDP_CUDA_CHECK_LAUNCH("gqa_reduce_kernel");
  });
}

}  // namespace ptdp::cuda
