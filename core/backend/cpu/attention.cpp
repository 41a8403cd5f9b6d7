// Causal self-attention core on GEMMs: one (batch, head) pair per OpenMP thread, OpenBLAS
// running single-threaded inside (its OpenMP build does so within a parallel region). Rows go in
// blocks: a block of queries [i0, i1) only sees keys [0, i1), so the GEMMs skip the masked upper
// blocks (with 4 blocks, 5/8 of the full s×s work).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/vec_math.h"

namespace ptdp::cpu {

namespace {
// Query rows per causal block: 4 blocks from s = 256 on, 2 from 128, else one.
int64_t causal_block(int64_t s) { return s >= 256 ? (s + 3) / 4 : (s >= 128 ? (s + 1) / 2 : s); }
}  // namespace

template <class T>
void attention_forward(T* y, T* probs, const T* qkv, int b, int s, int a, int hd) {
  const int64_t ld = int64_t(3) * a * hd;  // row stride of qkv
  const int64_t hl = int64_t(a) * hd;      // row stride of y
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t blk = causal_block(s);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t pair = 0; pair < int64_t(b) * a; ++pair) {
    int64_t bi = pair / a, head = pair % a;
    const T* q = qkv + bi * s * ld + head * 3 * hd;
    const T* k = q + hd;
    const T* v = q + 2 * hd;
    T* p = probs + pair * int64_t(s) * s;
    T* yp = y + bi * s * hl + head * hd;
    for (int64_t i0 = 0; i0 < s; i0 += blk) {
      const int64_t i1 = std::min<int64_t>(s, i0 + blk), rows = i1 - i0;
      gemm<T>(false, true, rows, i1, hd, scale, q + i0 * ld, ld, k, ld, T(0), p + i0 * s, s);  // S = Q K^T
      for (int64_t i = i0; i < i1; ++i) {
        T* row = p + i * s;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j <= i; ++j) row[j] = exp_of(row[j] - mx);  // vectorised for float
        T tot = 0;
        for (int64_t j = 0; j <= i; ++j) tot += row[j];
        T inv = T(1) / tot;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < s; ++j) row[j] = 0;
      }
      gemm<T>(false, false, rows, hd, i1, T(1), p + i0 * s, s, v, ld, T(0), yp + i0 * hl, hl);  // Y = P V
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dy, const T* qkv, const T* probs, int b, int s, int a,
                        int hd) {
  const int64_t ld = int64_t(3) * a * hd;
  const int64_t hl = int64_t(a) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t blk = causal_block(s);
  // dS per OpenMP thread, kept between calls (a fresh multi-megabyte buffer per call costs page
  // faults every layer).
  thread_local std::vector<T> scratch;
  const size_t need = static_cast<size_t>(omp_get_max_threads()) * blk * s;
  if (scratch.size() < need) scratch.resize(need);
  T* const scratch_base = scratch.data();
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t pair = 0; pair < int64_t(b) * a; ++pair) {
    int64_t bi = pair / a, head = pair % a;
    const T* q = qkv + bi * s * ld + head * 3 * hd;
    const T* k = q + hd;
    const T* v = q + 2 * hd;
    T* dq = dqkv + bi * s * ld + head * 3 * hd;
    T* dk = dq + hd;
    T* dv = dq + 2 * hd;
    const T* p = probs + pair * int64_t(s) * s;
    const T* dyp = dy + bi * s * hl + head * hd;
    T* ds = scratch_base + static_cast<size_t>(omp_get_thread_num()) * blk * s;
    for (int64_t i = 0; i < s; ++i)  // dK and dV accumulate over the row blocks
      for (int64_t c = 0; c < hd; ++c) dk[i * ld + c] = dv[i * ld + c] = T(0);
    for (int64_t i0 = 0; i0 < s; i0 += blk) {
      const int64_t i1 = std::min<int64_t>(s, i0 + blk), rows = i1 - i0;
      const T* pb = p + i0 * s;
      gemm<T>(false, true, rows, i1, hd, T(1), dyp + i0 * hl, hl, v, ld, T(0), ds, s);  // dP = dY V^T
      gemm<T>(true, false, i1, hd, rows, T(1), pb, s, dyp + i0 * hl, hl, T(1), dv, ld);  // dV += P^T dY
      for (int64_t i = i0; i < i1; ++i) {  // dS = P * (dP - rowsum(dP * P)), scaled
        const T* pr = p + i * s;
        T* dr = ds + (i - i0) * s;
        T dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += pr[j] * dr[j];
        for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
        for (int64_t j = i + 1; j < i1; ++j) dr[j] = 0;
      }
      gemm<T>(false, false, rows, hd, i1, T(1), ds, s, k, ld, T(0), dq + i0 * ld, ld);  // dQ = dS K
      gemm<T>(true, false, i1, hd, rows, T(1), ds, s, q + i0 * ld, ld, T(1), dk, ld);   // dK += dS^T Q
    }
  }
}

// Grouped-query attention. x row: g groups of (r + 2) blocks of hd (r = a/g query heads, key,
// value); y row: a heads of 3 blocks (q, k, v). Head j = group j / r, query j % r of it.
template <class T>
void gqa_expand(T* y, const T* x, int64_t n, int a, int g, int hd) {
  const int r = a / g;
  const int64_t xw = int64_t(g) * (r + 2) * hd, yw = int64_t(3) * a * hd;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < n; ++row) {
    const T* xr = x + row * xw;
    T* yr = y + row * yw;
    for (int j = 0; j < a; ++j) {
      const T* grp = xr + int64_t(j / r) * (r + 2) * hd;
      T* hy = yr + int64_t(j) * 3 * hd;
      for (int i = 0; i < hd; ++i) {
        hy[i] = grp[int64_t(j % r) * hd + i];    // q
        hy[hd + i] = grp[int64_t(r) * hd + i];   // k of the group
        hy[2 * hd + i] = grp[int64_t(r + 1) * hd + i];  // v of the group
      }
    }
  }
}

// The transpose: queries copied back, keys and values summed over the group's r heads (in head
// order).
template <class T>
void gqa_reduce(T* dx, const T* dy, int64_t n, int a, int g, int hd) {
  const int r = a / g;
  const int64_t xw = int64_t(g) * (r + 2) * hd, yw = int64_t(3) * a * hd;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < n; ++row) {
    const T* yr = dy + row * yw;
    T* xr = dx + row * xw;
    for (int k = 0; k < g; ++k) {
      T* grp = xr + int64_t(k) * (r + 2) * hd;
      for (int i = 0; i < hd; ++i) {
        T dk = 0, dv = 0;
        for (int q = 0; q < r; ++q) {
          const T* hy = yr + int64_t(k * r + q) * 3 * hd;
          grp[int64_t(q) * hd + i] = hy[i];
          dk += hy[hd + i];
          dv += hy[2 * hd + i];
        }
        grp[int64_t(r) * hd + i] = dk;
        grp[int64_t(r + 1) * hd + i] = dv;
      }
    }
  }
}

template void gqa_expand<float>(float*, const float*, int64_t, int, int, int);
template void gqa_expand<double>(double*, const double*, int64_t, int, int, int);
template void gqa_reduce<float>(float*, const float*, int64_t, int, int, int);
template void gqa_reduce<double>(double*, const double*, int64_t, int, int, int);
template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int);

}  // namespace ptdp::cpu
