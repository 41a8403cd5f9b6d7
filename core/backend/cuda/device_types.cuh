// Device-side helpers for the kernels: loads and stores of f32 / bf16 / f16 through f32
// registers, warp and block reductions, and the host dispatch from a DType to the C++ type.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/launch.cuh"
#include "core/common/error.h"
#include "core/tensor/dtype.h"

namespace ptdp::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

// Round to nearest even; usable on the host too (fill values).
template <class T> __host__ __device__ __forceinline__ T from_f32(float x);
template <> __host__ __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __host__ __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __host__ __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

template <class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
template <class T> __device__ T block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  T r = lane < warps ? part[lane] : T(0);
  return warp_sum(r);
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float r = lane < warps ? part[lane] : -INFINITY;
  return warp_max(r);
}

// K consecutive elements of T as one load or store: with K = 16 / sizeof(T) one 16-byte access
// (LDG.128 / STG.128) where the elements start 16-byte aligned; K = 1 is the element itself.
template <class T, int K> struct alignas(sizeof(T) * K) Pack {
  T v[K];
};
// A pack's address must be aligned to its size: a GPU stops the kernel otherwise
// (cudaErrorMisalignedAddress). The host's loads would take any address, so the virtual GPU checks.
template <int K, class T> __device__ __forceinline__ void check_pack_address(const T* p) {
#ifdef PTDP_VGPU
  constexpr size_t kBytes = sizeof(Pack<T, K>);
  if constexpr (K > 1)
    if (reinterpret_cast<uintptr_t>(p) % kBytes != 0) ::vgpu::detail::misaligned_access(p, kBytes);
#else
  (void)p;
#endif
}
template <int K, class T> __device__ __forceinline__ Pack<T, K> load_pack(const T* p) {
  check_pack_address<K>(p);
  return *reinterpret_cast<const Pack<T, K>*>(p);
}
template <int K, class T> __device__ __forceinline__ void store_pack(T* p, const Pack<T, K>& v) {
  check_pack_address<K>(p);
  *reinterpret_cast<Pack<T, K>*>(p) = v;
}
template <class T> constexpr int kPack16 = static_cast<int>(16 / sizeof(T));  // elements in 16 bytes
// The pack of x at i; with kAdd, x += residual there first (rounded to T and stored back), the
// norms' folded residual add.
template <bool kAdd, int K, class T>
__device__ __forceinline__ Pack<T, K> load_adding(T* x, const T* residual, int64_t i) {
  Pack<T, K> xv = load_pack<K>(x + i);
  if constexpr (kAdd) {
    const Pack<T, K> rv = load_pack<K>(residual + i);
    for (int k = 0; k < K; ++k) xv.v[k] = from_f32<T>(to_f32(xv.v[k]) + to_f32(rv.v[k]));
    store_pack<K>(x + i, xv);
  }
  return xv;
}
// Rows of `cols` elements of T at these addresses can be read in 16-byte packs (null: not used).
template <class T> bool packs16(int64_t cols, std::initializer_list<const void*> ptrs) {
  if (cols % kPack16<T> != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65536) b = 65536;
  return static_cast<unsigned>(b);
}

// One block a row for kernels whose block's threads share a row's columns (no division an
// element); rows beyond 65535 by a grid-stride loop over blockIdx.x.
inline unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < 65535 ? rows : 65535); }

// Calls f(T{}) with T = float, __nv_bfloat16 or __half for the dtype.
template <class F>
void dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); break;
    case DType::BF16: f(__nv_bfloat16{}); break;
    case DType::F16: f(__half{}); break;
    default: PTDP_CHECK(false, "{}: the CUDA backend computes in f32, bf16 or f16, not {}", op, dtype_name(dt));
  }
}

}  // namespace ptdp::cuda
