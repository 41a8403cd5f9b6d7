// Embedding lookup (f32 atomic scatter-add for its gradients) and the vocab-shardable pieces
// of cross-entropy, one block per row of logits.
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;

// The embedding: one block a row (its token), the threads over the row's h columns, K at a time (a
// 16-byte pack where h and the alignment allow: packs16); no division an element.
template <class T, int K>
__global__ void embedding_forward_kernel(T* x, const int32_t* tok, const T* wte, int64_t wte_rows,
                                         int64_t vocab_start, const T* wpe, int64_t n, int64_t h, int s) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int64_t id = int64_t(tok[r]) - vocab_start;
    const bool here = id >= 0 && id < wte_rows;  // this rank's slice of the vocabulary
    const T* pos = wpe ? wpe + (r % s) * h : nullptr;
    for (int64_t i = int64_t(threadIdx.x) * K; i < h; i += int64_t(blockDim.x) * K) {
      float v[K];
      if (here) {
        const Pack<T, K> w = load_pack<K>(wte + id * h + i);
        for (int k = 0; k < K; ++k) v[k] = to_f32(w.v[k]);
      } else {
        for (int k = 0; k < K; ++k) v[k] = 0.0f;
      }
      if (pos) {
        const Pack<T, K> p = load_pack<K>(pos + i);
        for (int k = 0; k < K; ++k) v[k] += to_f32(p.v[k]);
      }
      Pack<T, K> out;
      for (int k = 0; k < K; ++k) out.v[k] = from_f32<T>(v[k]);
      store_pack<K>(x + r * h + i, out);
    }
  }
}

template <class T, int K>
__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const T* dx, const int32_t* tok, int64_t wte_rows,
                                          int64_t vocab_start, int64_t n, int64_t h, int s) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int64_t id = int64_t(tok[r]) - vocab_start;
    const bool here = id >= 0 && id < wte_rows;
    for (int64_t i = int64_t(threadIdx.x) * K; i < h; i += int64_t(blockDim.x) * K) {
      const Pack<T, K> d = load_pack<K>(dx + r * h + i);
      for (int k = 0; k < K; ++k) {
        if (here) atomicAdd(dwte + id * h + i + k, to_f32(d.v[k]));
        if (dwpe) atomicAdd(dwpe + (r % s) * h + i + k, to_f32(d.v[k]));
      }
    }
  }
}

// The row kernels below: one block per row; each thread reads K elements at a time (a 16-byte pack
// where v and the logits' alignment allow: packs16), the last v_valid % K valid ones one by one.
template <class T, int K> __global__ void row_max_kernel(float* max, const T* logits, int64_t v, int64_t v_valid) {
  const T* l = logits + blockIdx.x * v;
  const int64_t packed_end = v_valid / K * K;
  float m = -INFINITY;
  for (int64_t j = int64_t(threadIdx.x) * K; j < packed_end; j += int64_t(blockDim.x) * K) {
    const Pack<T, K> x = load_pack<K>(l + j);
    for (int k = 0; k < K; ++k) m = fmaxf(m, to_f32(x.v[k]));
  }
  for (int64_t j = packed_end + threadIdx.x; j < v_valid; j += blockDim.x) m = fmaxf(m, to_f32(l[j]));
  m = block_max(m);
  if (threadIdx.x == 0) max[blockIdx.x] = m;
}

template <class T, int K>
__global__ void sum_exp_kernel(float* se, const T* logits, const float* max, int64_t v, int64_t v_valid) {
  const T* l = logits + blockIdx.x * v;
  const int64_t packed_end = v_valid / K * K;
  const float m = max[blockIdx.x];
  float tot = 0.0f;
  for (int64_t j = int64_t(threadIdx.x) * K; j < packed_end; j += int64_t(blockDim.x) * K) {
    const Pack<T, K> x = load_pack<K>(l + j);
    for (int k = 0; k < K; ++k) tot += expf(to_f32(x.v[k]) - m);
  }
  for (int64_t j = packed_end + threadIdx.x; j < v_valid; j += blockDim.x) tot += expf(to_f32(l[j]) - m);
  tot = block_sum(tot);
  if (threadIdx.x == 0) se[blockIdx.x] = tot;
}

template <class T>
__global__ void target_logit_kernel(float* tgt, const T* logits, const int32_t* targets, int64_t n, int64_t v,
                                    int64_t vocab_start, int64_t v_valid) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < n; r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = int64_t(targets[r]) - vocab_start;
    tgt[r] = (t >= 0 && t < v_valid) ? to_f32(logits[r * v + t]) : 0.0f;
  }
}

__global__ void loss_kernel(float* loss, const float* max, const float* se, const float* tgt, int64_t n) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < n; r += int64_t(gridDim.x) * blockDim.x)
    loss[r] = logf(se[r]) + max[r] - tgt[r];
}

// dlogits over the whole padded row (v a multiple of K where packed).
template <class T, int K>
__global__ void xent_backward_kernel(T* dlogits, const T* logits, const float* max, const float* se,
                                     const int32_t* targets, int64_t v, int64_t vocab_start, int64_t v_valid,
                                     float scale) {
  const int64_t r = blockIdx.x;
  const T* l = logits + r * v;
  T* d = dlogits + r * v;
  const float m = max[r], inv = 1.0f / se[r];
  const int64_t t = int64_t(targets[r]) - vocab_start;
  for (int64_t j0 = int64_t(threadIdx.x) * K; j0 < v; j0 += int64_t(blockDim.x) * K) {
    const Pack<T, K> x = load_pack<K>(l + j0);
    Pack<T, K> out;
    for (int k = 0; k < K; ++k) {
      const int64_t j = j0 + k;
      float g = 0.0f;
      if (j < v_valid) g = scale * expf(to_f32(x.v[k]) - m) * inv - (j == t ? scale : 0.0f);
      out.v[k] = from_f32<T>(g);
    }
    store_pack<K>(d + j0, out);
  }
}

}  // namespace

void embedding_forward(void* x, const int32_t* tok, const void* wte, int64_t wte_rows, int64_t vocab_start,
                       const void* wpe, DType dt, int64_t n, int64_t h, int s, cudaStream_t st) {
  if (n * h == 0) return;
  dispatch_float(dt, "embedding_forward", [&](auto z) {
    using T = decltype(z);
    T* const tx = static_cast<T*>(x);
    const T *const tw = static_cast<const T*>(wte), *const tp = static_cast<const T*>(wpe);
    if (packs16<T>(h, {x, wte, wpe ? wpe : wte}))
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, embedding_forward_kernel<T, kPack16<T>>)
      (tx, tok, tw, wte_rows, vocab_start, tp, n, h, s);
    else
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, embedding_forward_kernel<T, 1>)
      (tx, tok, tw, wte_rows, vocab_start, tp, n, h, s);
    PTDP_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
  });
}

void embedding_backward(float* dwte, float* dwpe, const void* dx, DType dt, const int32_t* tok, int64_t wte_rows,
                        int64_t vocab_start, int64_t n, int64_t h, int s, cudaStream_t st) {
  if (n * h == 0) return;
  dispatch_float(dt, "embedding_backward", [&](auto z) {
    using T = decltype(z);
    const T* const tdx = static_cast<const T*>(dx);
    if (packs16<T>(h, {dx}))
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, embedding_backward_kernel<T, kPack16<T>>)
      (dwte, dwpe, tdx, tok, wte_rows, vocab_start, n, h, s);
    else
      PTDP_LAUNCH(row_grid(n), kThreads, 0, st, embedding_backward_kernel<T, 1>)
      (dwte, dwpe, tdx, tok, wte_rows, vocab_start, n, h, s);
    PTDP_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
  });
}

void xent_row_max(float* max, const void* logits, DType dt, int64_t n, int64_t v, int64_t v_valid, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "xent_row_max", [&](auto z) {
    using T = decltype(z);
    const T* l = static_cast<const T*>(logits);
    if (packs16<T>(v, {logits}))
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, row_max_kernel<T, kPack16<T>>)(max, l, v, v_valid);
    else
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, row_max_kernel<T, 1>)(max, l, v, v_valid);
    PTDP_CUDA_CHECK_LAUNCH("row_max_kernel");
  });
}

void xent_sum_exp(float* se, const void* logits, const float* max, DType dt, int64_t n, int64_t v, int64_t v_valid,
                  cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "xent_sum_exp", [&](auto z) {
    using T = decltype(z);
    const T* l = static_cast<const T*>(logits);
    if (packs16<T>(v, {logits}))
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, sum_exp_kernel<T, kPack16<T>>)(se, l, max, v, v_valid);
    else
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, sum_exp_kernel<T, 1>)(se, l, max, v, v_valid);
    PTDP_CUDA_CHECK_LAUNCH("sum_exp_kernel");
  });
}

void xent_target_logit(float* tgt, const void* logits, DType dt, const int32_t* targets, int64_t n, int64_t v,
                       int64_t vocab_start, int64_t v_valid, cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "xent_target_logit", [&](auto z) {
    using T = decltype(z);
    PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, target_logit_kernel<T>)
    (tgt, static_cast<const T*>(logits), targets, n, v, vocab_start, v_valid);
    PTDP_CUDA_CHECK_LAUNCH("target_logit_kernel");
  });
}

void xent_loss(float* loss, const float* max, const float* se, const float* tgt, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  PTDP_LAUNCH(grid_for(n, kThreads), kThreads, 0, st, loss_kernel)(loss, max, se, tgt, n);
  PTDP_CUDA_CHECK_LAUNCH("loss_kernel");
}

void xent_backward(void* dlogits, const void* logits, const float* max, const float* se, DType dt,
                   const int32_t* targets, int64_t n, int64_t v, int64_t vocab_start, int64_t v_valid, float scale,
                   cudaStream_t st) {
  if (n == 0) return;
  dispatch_float(dt, "xent_backward", [&](auto z) {
    using T = decltype(z);
    T* const d = static_cast<T*>(dlogits);
    const T* const l = static_cast<const T*>(logits);
    if (packs16<T>(v, {dlogits, logits}))
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, xent_backward_kernel<T, kPack16<T>>)
      (d, l, max, se, targets, v, vocab_start, v_valid, scale);
    else
      PTDP_LAUNCH(unsigned(n), kThreads, 0, st, xent_backward_kernel<T, 1>)
      (d, l, max, se, targets, v, vocab_start, v_valid, scale);
    PTDP_CUDA_CHECK_LAUNCH("xent_backward_kernel");
  });
}

}  // namespace ptdp::cuda
