// Block attention in flash attention's form (Backend::flash_attention_forward/backward,
// attention_merge): tiles of queries and keys in shared memory, the online softmax in f32, no
// [s, s] buffer; causal with position offsets (key tiles that every row of a block masks are never
// read); grouped-query heads read in place (query head h reads key/value head h / (a/g)).
// Backward is FlashAttention-2's scheme with a separate pass for dq (no atomics: deterministic):
// delta = rowsum(dy * y), then one kernel per key tile for dk and dv (looping over the group's query
// heads and the query tiles) and one per query tile for dq (looping over the key tiles), each
// rebuilding P = exp(s - lse). The arithmetic is scalar f32 FMAs (no tensor cores): the portable
// path the virtual GPU runs. Same semantics as the CPU backend's (core/backend/cpu/block_attention.cpp).
#include <cmath>
#include <type_traits>

#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kTile = 32;  // keys (forward, dq) or queries (dk, dv) per tile: one per lane

struct Sizes {
  int b, sq, sk, a, g, hd;
  int64_t q_pos, k_pos;
  bool causal;
  float scale;
  __device__ int64_t lq() const { return int64_t(a) * hd; }
  __device__ int64_t lk() const { return int64_t(g) * hd; }
  // Whether query i sees key j (block-local indices, both in range).
  __device__ bool sees(int i, int j) const { return !causal || k_pos + j <= q_pos + i; }
  // Keys [0, n) that query row i may see (i < sq).
  __device__ int visible_keys(int i) const {
    if (!causal) return sk;
    const int64_t n = q_pos + i - k_pos + 1;
    return n < 0 ? 0 : n > sk ? sk : int(n);
  }
};

// Rows [0, rows) of a [rows, D(+pad)] shared tile from global rows src + (first + row) * ld, columns
// [0, hd); rows past `limit` are zero.
template <class T, int Rows, int Ld>
__device__ void load_rows(float (&dst)[Rows][Ld], const T* src, int64_t ld, int first, int limit, int hd) {
  for (int e = threadIdx.x; e < Rows * hd; e += kThreads) {
    const int row = e / hd, d = e - row * hd;
    dst[row][d] = first + row < limit ? to_f32(src[int64_t(first + row) * ld + d]) : 0.0f;
  }
}

template <int Ld> __device__ __forceinline__ float dot(const float* x, const float (&kv)[kTile][Ld], int j, int hd) {
  float s = 0.0f;
  for (int d = 0; d < hd; ++d) s += x[d] * kv[j][d];
  return s;
}

// One block per (query tile of kWarps * R rows, head, sequence); warp w owns rows w*R .. w*R+R-1;
// lane j scores key j of each key tile. Accumulators: acc[r][c] is output column lane + 32c.
template <class T, int D, int R>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(T* __restrict__ y, float* __restrict__ lse, const T* __restrict__ q,
                         const T* __restrict__ k, const T* __restrict__ v, Sizes z) {
  constexpr int kRows = kWarps * R, kC = D / 32;
  __shared__ float qs[kRows][D];
  __shared__ float kv[kTile][D + 1];  // the key tile, then the value tile
  __shared__ float ps[kWarps][R][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kRows, h = blockIdx.y, bi = blockIdx.z, kh = h / (z.a / z.g);
  const int64_t lq = z.lq(), lk = z.lk();
  const T* qp = q + int64_t(bi) * z.sq * lq + int64_t(h) * z.hd;
  const T* kp = k + int64_t(bi) * z.sk * lk + int64_t(kh) * z.hd;
  const T* vp = v + int64_t(bi) * z.sk * lk + int64_t(kh) * z.hd;
  load_rows(qs, qp, lq, i0, z.sq, z.hd);
  const int last = (i0 + kRows < z.sq ? i0 + kRows : z.sq) - 1;
  const int jmax = z.visible_keys(last);  // keys past it are masked for every row of the block
  float m[R], l[R], acc[R][kC];
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.0f;
  }
  for (int j0 = 0; j0 < jmax; j0 += kTile) {
    __syncthreads();  // the previous value tile is read
    load_rows(kv, kp, lk, j0, z.sk, z.hd);
    __syncthreads();
    const int j = j0 + lane;
    for (int r = 0; r < R; ++r) {
      const int row = warp * R + r, i = i0 + row;
      const bool vis = i < z.sq && j < z.sk && z.sees(i, j);
      const float s = vis ? dot(qs[row], kv, lane, z.hd) * z.scale : -INFINITY;
      const float mn = fmaxf(m[r], warp_max(s));
      float p = 0.0f;
      if (mn != -INFINITY) {  // warp-uniform
        p = vis ? expf(s - mn) : 0.0f;
        const float corr = expf(m[r] - mn);  // 0 while m is -inf
        l[r] = l[r] * corr + warp_sum(p);
        for (int c = 0; c < kC; ++c) acc[r][c] *= corr;
        m[r] = mn;
      }
      ps[warp][r][lane] = p;
    }
    __syncthreads();  // the key tile is read; ps is written
    load_rows(kv, vp, lk, j0, z.sk, z.hd);
    __syncthreads();
    for (int r = 0; r < R; ++r)
      for (int jj = 0; jj < kTile; ++jj) {
        const float p = ps[warp][r][jj];
        for (int c = 0; c < kC; ++c)
          if (lane + 32 * c < z.hd) acc[r][c] += p * kv[jj][lane + 32 * c];
      }
  }
  for (int r = 0; r < R; ++r) {
    const int i = i0 + warp * R + r;
    if (i >= z.sq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* yr = y + (int64_t(bi) * z.sq + i) * lq + int64_t(h) * z.hd;
    for (int c = 0; c < kC; ++c)
      if (lane + 32 * c < z.hd) yr[lane + 32 * c] = from_f32<T>(acc[r][c] * inv);
    if (lane == 0) lse[(int64_t(bi) * z.a + h) * z.sq + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

// delta[(bi, h, i)] = sum over the head's columns of dy * y, one warp per (row, head).
template <class T>
__global__ void flash_delta_kernel(float* __restrict__ delta, const T* __restrict__ dy, const T* __restrict__ y,
                                   Sizes z) {
  const int64_t seg = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;  // (bi, i, h) in row order
  const int lane = threadIdx.x % 32;
  if (seg >= int64_t(z.b) * z.sq * z.a) return;
  const int h = int(seg % z.a);
  const int64_t row = seg / z.a, bi = row / z.sq, i = row % z.sq;
  const T* dr = dy + seg * z.hd;
  const T* yr = y + seg * z.hd;
  float s = 0.0f;
  for (int d = lane; d < z.hd; d += 32) s += to_f32(dr[d]) * to_f32(yr[d]);
  s = warp_sum(s);
  if (lane == 0) delta[(bi * z.a + h) * z.sq + i] = s;
}

// dq += sum_j dS_ij k_j, dS = P (dP - delta) scale, P = exp(s - lse), dP = dy . v_j. One block per
// (query tile, head, sequence), as forward.
template <class T, int D, int R>
__global__ void __launch_bounds__(kThreads)
    flash_dq_kernel(T* __restrict__ dq, const T* __restrict__ dy, const T* __restrict__ q, const T* __restrict__ k,
                    const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                    Sizes z) {
  constexpr int kRows = kWarps * R, kC = D / 32;
  __shared__ float qs[kRows][D];
  __shared__ float dys[kRows][D];
  __shared__ float ks[kTile][D + 1];
  __shared__ float vs[kTile][D + 1];
  __shared__ float dss[kWarps][R][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kRows, h = blockIdx.y, bi = blockIdx.z, kh = h / (z.a / z.g);
  const int64_t lq = z.lq(), lk = z.lk(), off = int64_t(bi) * z.sq * lq + int64_t(h) * z.hd;
  const T* kp = k + int64_t(bi) * z.sk * lk + int64_t(kh) * z.hd;
  const T* vp = v + int64_t(bi) * z.sk * lk + int64_t(kh) * z.hd;
  load_rows(qs, q + off, lq, i0, z.sq, z.hd);
  load_rows(dys, dy + off, lq, i0, z.sq, z.hd);
  float lrow[R], drow[R], acc[R][kC];
  for (int r = 0; r < R; ++r) {
    const int i = i0 + warp * R + r;
    const int64_t s = (int64_t(bi) * z.a + h) * z.sq + i;
    lrow[r] = i < z.sq ? lse[s] : -INFINITY;
    drow[r] = i < z.sq ? delta[s] : 0.0f;
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.0f;
  }
  const int last = (i0 + kRows < z.sq ? i0 + kRows : z.sq) - 1;
  const int jmax = z.visible_keys(last);
  for (int j0 = 0; j0 < jmax; j0 += kTile) {
    __syncthreads();  // the previous tiles and dss are read
    load_rows(ks, kp, lk, j0, z.sk, z.hd);
    load_rows(vs, vp, lk, j0, z.sk, z.hd);
    __syncthreads();
    const int j = j0 + lane;
    for (int r = 0; r < R; ++r) {
      const int row = warp * R + r, i = i0 + row;
      const bool vis = i < z.sq && j < z.sk && z.sees(i, j) && lrow[r] != -INFINITY;
      float ds = 0.0f;
      if (vis) {
        const float p = expf(dot(qs[row], ks, lane, z.hd) * z.scale - lrow[r]);
        ds = p * (dot(dys[row], vs, lane, z.hd) - drow[r]) * z.scale;
      }
      dss[warp][r][lane] = ds;
    }
    __syncwarp();
    for (int r = 0; r < R; ++r)
      for (int jj = 0; jj < kTile; ++jj) {
        const float ds = dss[warp][r][jj];
        for (int c = 0; c < kC; ++c)
          if (lane + 32 * c < z.hd) acc[r][c] += ds * ks[jj][lane + 32 * c];
      }
  }
  for (int r = 0; r < R; ++r) {
    const int i = i0 + warp * R + r;
    if (i >= z.sq) continue;
    T* dr = dq + off + int64_t(i) * lq;
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < z.hd) dr[d] = from_f32<T>(to_f32(dr[d]) + acc[r][c]);
    }
  }
}

// dv += sum_i P_ij dy_i and dk += sum_i dS_ij q_i over the query heads of key/value head kh, in
// head order, then the query tiles in order. One block per (key tile of kWarps * R keys, kv head,
// sequence); warp w owns keys w*R .. w*R+R-1; lane i takes query i of each query tile.
template <class T, int D, int R>
__global__ void __launch_bounds__(kThreads)
    flash_dkv_kernel(T* __restrict__ dk, T* __restrict__ dv, const T* __restrict__ dy, const T* __restrict__ q,
                     const T* __restrict__ k, const T* __restrict__ v, const float* __restrict__ lse,
                     const float* __restrict__ delta, Sizes z) {
  constexpr int kRows = kWarps * R, kC = D / 32;
  __shared__ float ks[kRows][D];
  __shared__ float vs[kRows][D];
  __shared__ float qt[kTile][D + 1];
  __shared__ float dyt[kTile][D + 1];
  __shared__ float pt[kWarps][R][kTile];
  __shared__ float dst[kWarps][R][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = blockIdx.x * kRows, kh = blockIdx.y, bi = blockIdx.z, rq = z.a / z.g;
  const int64_t lq = z.lq(), lk = z.lk(), koff = int64_t(bi) * z.sk * lk + int64_t(kh) * z.hd;
  load_rows(ks, k + koff, lk, j0, z.sk, z.hd);
  load_rows(vs, v + koff, lk, j0, z.sk, z.hd);
  float dka[R][kC], dva[R][kC];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < kC; ++c) dka[r][c] = dva[r][c] = 0.0f;
  // The first query that sees the block's first key (causal); earlier query tiles see none of it.
  int ifirst = 0;
  if (z.causal) {
    const int64_t f = z.k_pos + j0 - z.q_pos;
    ifirst = f < 0 ? 0 : f > z.sq ? z.sq : int(f);
  }
  for (int h = kh * rq; h < (kh + 1) * rq; ++h) {
    const int64_t qoff = int64_t(bi) * z.sq * lq + int64_t(h) * z.hd;
    const float* lh = lse + (int64_t(bi) * z.a + h) * z.sq;
    const float* dh = delta + (int64_t(bi) * z.a + h) * z.sq;
    for (int t0 = ifirst / kTile * kTile; t0 < z.sq; t0 += kTile) {
      __syncthreads();  // the previous tiles, pt and dst are read
      load_rows(qt, q + qoff, lq, t0, z.sq, z.hd);
      load_rows(dyt, dy + qoff, lq, t0, z.sq, z.hd);
      __syncthreads();
      const int i = t0 + lane;
      const float li = i < z.sq ? lh[i] : -INFINITY, di = i < z.sq ? dh[i] : 0.0f;
      for (int r = 0; r < R; ++r) {
        const int row = warp * R + r, j = j0 + row;
        const bool vis = i < z.sq && j < z.sk && z.sees(i, j) && li != -INFINITY;
        float p = 0.0f, ds = 0.0f;
        if (vis) {
          p = expf(dot(ks[row], qt, lane, z.hd) * z.scale - li);
          ds = p * (dot(vs[row], dyt, lane, z.hd) - di) * z.scale;
        }
        pt[warp][r][lane] = p;
        dst[warp][r][lane] = ds;
      }
      __syncwarp();
      for (int r = 0; r < R; ++r)
        for (int ii = 0; ii < kTile; ++ii) {
          const float p = pt[warp][r][ii], ds = dst[warp][r][ii];
          for (int c = 0; c < kC; ++c)
            if (lane + 32 * c < z.hd) {
              dva[r][c] += p * dyt[ii][lane + 32 * c];
              dka[r][c] += ds * qt[ii][lane + 32 * c];
            }
        }
    }
  }
  for (int r = 0; r < R; ++r) {
    const int j = j0 + warp * R + r;
    if (j >= z.sk) continue;
    T* kr = dk + koff + int64_t(j) * lk;
    T* vr = dv + koff + int64_t(j) * lk;
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d >= z.hd) continue;
      kr[d] = from_f32<T>(to_f32(kr[d]) + dka[r][c]);
      vr[d] = from_f32<T>(to_f32(vr[d]) + dva[r][c]);
    }
  }
}

// One thread per (row, head, column); lse index (bi, h, i) for row bi*sq + i.
template <class T>
__global__ void attention_merge_kernel(T* __restrict__ y, float* __restrict__ lse, const T* __restrict__ y2,
                                       const float* __restrict__ lse2, int b, int sq, int a, int hd) {
  const int64_t total = int64_t(b) * sq * a * hd;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t seg = t / hd;  // (bi, i, h)
    const int h = int(seg % a);
    const int64_t row = seg / a, bi = row / sq, i = row % sq, li = (bi * a + h) * sq + i;
    const float l1 = lse[li], l2 = lse2[li];
    if (l2 == -INFINITY) continue;  // the block adds nothing
    if (l1 == -INFINITY) {
      y[t] = y2[t];
    } else {
      const float mx = fmaxf(l1, l2), e1 = expf(l1 - mx), e2 = expf(l2 - mx), tot = e1 + e2;
      y[t] = from_f32<T>(to_f32(y[t]) * (e1 / tot) + to_f32(y2[t]) * (e2 / tot));
    }
  }
}

// The merged lse, after the outputs (they read the old one).
__global__ void lse_merge_kernel(float* __restrict__ lse, const float* __restrict__ lse2, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    const float l1 = lse[t], l2 = lse2[t];
    if (l2 == -INFINITY) continue;
    if (l1 == -INFINITY) {
      lse[t] = l2;
      continue;
    }
    const float mx = fmaxf(l1, l2);
    lse[t] = mx + logf(expf(l1 - mx) + expf(l2 - mx));
  }
}

Sizes sizes(const FlashShape& s) {
  return Sizes{s.b, s.sq, s.sk, s.a, s.g, s.hd, s.q_pos, s.k_pos, s.causal, 1.0f / std::sqrt(float(s.hd))};
}

unsigned tiles(int n, int rows) { return static_cast<unsigned>((n + rows - 1) / rows); }

// Calls f(std::integral_constant<int, D>) with the smallest supported D >= hd.
template <class F> void dispatch_head(int hd, F&& f) {
  PTDP_CHECK(hd <= kFlashMaxHead, "flash attention on the CUDA backend takes head sizes up to {}, not {}",
             kFlashMaxHead, hd);
  if (hd <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

}  // namespace

void flash_attention_forward(void* y, float* lse, const void* q, const void* k, const void* v, DType dt,
                             const FlashShape& s, cudaStream_t st) {
  if (s.b == 0) return;
  const Sizes z = sizes(s);
  dispatch_float(dt, "flash_attention_forward", [&](auto t) {
    using T = decltype(t);
    dispatch_head(s.hd, [&](auto dc) {
      constexpr int D = decltype(dc)::value, R = 8;
      const dim3 grid(tiles(s.sq, kWarps * R), unsigned(s.a), unsigned(s.b));
      PTDP_LAUNCH(grid, kThreads, 0, st, flash_forward_kernel<T, D, R>)
      (static_cast<T*>(y), lse, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), z);
      PTDP_CUDA_CHECK_LAUNCH("flash_forward_kernel");
    });
  });
}

void flash_attention_backward(void* dq, void* dk, void* dv, const void* dy, const void* q, const void* k,
                              const void* v, const void* y, const float* lse, float* delta, DType dt,
                              const FlashShape& s, cudaStream_t st) {
  if (s.b == 0) return;
  const Sizes z = sizes(s);
  dispatch_float(dt, "flash_attention_backward", [&](auto t) {
    using T = decltype(t);
    const T *tdy = static_cast<const T*>(dy), *tq = static_cast<const T*>(q), *tk = static_cast<const T*>(k),
            *tv = static_cast<const T*>(v);
    const int64_t segs = int64_t(s.b) * s.sq * s.a;
    PTDP_LAUNCH(static_cast<unsigned>((segs + kWarps - 1) / kWarps), kThreads, 0, st, flash_delta_kernel<T>)
    (delta, tdy, static_cast<const T*>(y), z);
    PTDP_CUDA_CHECK_LAUNCH("flash_delta_kernel");
    dispatch_head(s.hd, [&](auto dc) {
      constexpr int D = decltype(dc)::value, R = D > 64 ? 2 : 8;
      const dim3 kgrid(tiles(s.sk, kWarps * R), unsigned(s.g), unsigned(s.b));
      PTDP_LAUNCH(kgrid, kThreads, 0, st, flash_dkv_kernel<T, D, R>)
      (static_cast<T*>(dk), static_cast<T*>(dv), tdy, tq, tk, tv, lse, delta, z);
      PTDP_CUDA_CHECK_LAUNCH("flash_dkv_kernel");
      const dim3 qgrid(tiles(s.sq, kWarps * R), unsigned(s.a), unsigned(s.b));
      PTDP_LAUNCH(qgrid, kThreads, 0, st, flash_dq_kernel<T, D, R>)
      (static_cast<T*>(dq), tdy, tq, tk, tv, lse, delta, z);
      PTDP_CUDA_CHECK_LAUNCH("flash_dq_kernel");
    });
  });
}

void attention_merge(void* y, float* lse, const void* y2, const float* lse2, DType dt, int b, int sq, int a, int hd,
                     cudaStream_t st) {
  const int64_t n = int64_t(b) * sq * a;
  if (n == 0) return;
  constexpr int kMergeThreads = 256;
  dispatch_float(dt, "attention_merge", [&](auto t) {
    using T = decltype(t);
    PTDP_LAUNCH(grid_for(n * hd, kMergeThreads), kMergeThreads, 0, st, attention_merge_kernel<T>)
    (static_cast<T*>(y), lse, static_cast<const T*>(y2), lse2, b, sq, a, hd);
    PTDP_CUDA_CHECK_LAUNCH("attention_merge_kernel");
  });
  PTDP_LAUNCH(grid_for(n, kMergeThreads), kMergeThreads, 0, st, lse_merge_kernel)(lse, lse2, n);
  PTDP_CUDA_CHECK_LAUNCH("lse_merge_kernel");
}

}  // namespace ptdp::cuda
