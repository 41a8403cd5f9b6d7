// Block attention on the CPU (flash attention's form with position offsets, log-sum-exp and
// grouped-query heads), the merge of two blocks' partial results, the q/k/v split of the fused
// projection and rotary embedding at given positions. One (batch, head) pair per OpenMP thread in
// forward, one (batch, key/value head) in backward (its query heads share dK and dV); queries go
// in row blocks of kRows, so at most kRows x sk scores exist per pair at a time, and a causal block
// multiplies only the keys its last row can see.
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

constexpr int64_t kRows = 64;  // query rows per block

// Keys [0, visible) that query row i (block-local) may see.
int64_t visible_keys(int64_t i, int64_t sk, int64_t q_pos, int64_t k_pos, bool causal) {
  if (!causal) return sk;
  return std::clamp<int64_t>(q_pos + i - k_pos + 1, 0, sk);
}

}  // namespace

template <class T>
void flash_attention_forward(T* y, T* lse, const T* q, const T* k, const T* v, int b, int sq, int sk, int a, int g,
                             int hd, int64_t q_pos, int64_t k_pos, bool causal) {
  const int r = a / g;
  const int64_t lq = int64_t(a) * hd, lk = int64_t(g) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  const T neg_inf = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    std::vector<T> sbuf(size_t(std::min<int64_t>(kRows, sq)) * sk);
#pragma omp for schedule(dynamic, 1)
    for (int64_t pair = 0; pair < int64_t(b) * a; ++pair) {
      const int64_t bi = pair / a, h = pair % a;
      const T* qp = q + bi * sq * lq + h * hd;
      const T* kp = k + bi * sk * lk + (h / r) * hd;
      const T* vp = v + bi * sk * lk + (h / r) * hd;
      T* yp = y + bi * sq * lq + h * hd;
      T* lp = lse + pair * sq;
      for (int64_t i0 = 0; i0 < sq; i0 += kRows) {
        const int64_t i1 = std::min<int64_t>(sq, i0 + kRows), rows = i1 - i0;
        const int64_t jmax = visible_keys(i1 - 1, sk, q_pos, k_pos, causal);
        T* s = sbuf.data();
        if (jmax > 0) gemm<T>(false, true, rows, jmax, hd, scale, qp + i0 * lq, lq, kp, lk, T(0), s, jmax);
        for (int64_t i = i0; i < i1; ++i) {
          T* row = s + (i - i0) * jmax;
          const int64_t lim = std::min(jmax, visible_keys(i, sk, q_pos, k_pos, causal));
          if (lim == 0) {
            lp[i] = neg_inf;
            for (int64_t j = 0; j < jmax; ++j) row[j] = 0;
            continue;
          }
          T mx = row[0];
          for (int64_t j = 1; j < lim; ++j) mx = row[j] > mx ? row[j] : mx;
          T tot = 0;
          for (int64_t j = 0; j < lim; ++j) tot += row[j] = exp_of(row[j] - mx);
          const T inv = T(1) / tot;
          for (int64_t j = 0; j < lim; ++j) row[j] *= inv;
          for (int64_t j = lim; j < jmax; ++j) row[j] = 0;
          lp[i] = mx + std::log(tot);
        }
        if (jmax > 0) {
          gemm<T>(false, false, rows, hd, jmax, T(1), s, jmax, vp, lk, T(0), yp + i0 * lq, lq);  // Y = P V
        } else {
          for (int64_t i = i0; i < i1; ++i)
            for (int c = 0; c < hd; ++c) yp[i * lq + c] = 0;
        }
      }
    }
  }
}

template <class T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dy, const T* q, const T* k, const T* v, const T* y,
                              const T* lse, int b, int sq, int sk, int a, int g, int hd, int64_t q_pos,
                              int64_t k_pos, bool causal) {
  const int r = a / g;
  const int64_t lq = int64_t(a) * hd, lk = int64_t(g) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t blk = std::min<int64_t>(kRows, sq);
#pragma omp parallel
  {
    std::vector<T> pbuf(size_t(blk) * sk), dbuf(size_t(blk) * sk), drow(static_cast<size_t>(blk));
#pragma omp for schedule(dynamic, 1)
    for (int64_t pair = 0; pair < int64_t(b) * g; ++pair) {  // (batch, key/value head)
      const int64_t bi = pair / g, kh = pair % g;
      const T* kp = k + bi * sk * lk + kh * hd;
      const T* vp = v + bi * sk * lk + kh * hd;
      T* dkp = dk + bi * sk * lk + kh * hd;
      T* dvp = dv + bi * sk * lk + kh * hd;
      for (int64_t h = kh * r; h < (kh + 1) * r; ++h) {
        const int64_t off = bi * sq * lq + h * hd;
        const T* lp = lse + (bi * a + h) * sq;
        for (int64_t i0 = 0; i0 < sq; i0 += kRows) {
          const int64_t i1 = std::min<int64_t>(sq, i0 + kRows), rows = i1 - i0;
          const int64_t jmax = visible_keys(i1 - 1, sk, q_pos, k_pos, causal);
          if (jmax == 0) continue;
          T *p = pbuf.data(), *ds = dbuf.data();
          gemm<T>(false, true, rows, jmax, hd, scale, q + off + i0 * lq, lq, kp, lk, T(0), p, jmax);  // S
          for (int64_t i = i0; i < i1; ++i) {  // P = exp(S - lse) on the visible keys; D = rowsum(dY * Y)
            T* row = p + (i - i0) * jmax;
            const int64_t lim = std::min(jmax, visible_keys(i, sk, q_pos, k_pos, causal));
            const bool empty = lim == 0 || std::isinf(lp[i]);
            const int64_t live = empty ? 0 : lim;
            for (int64_t j = 0; j < live; ++j) row[j] = exp_of(row[j] - lp[i]);
            for (int64_t j = live; j < jmax; ++j) row[j] = 0;
            T d = 0;
            for (int c = 0; c < hd; ++c) d += dy[off + i * lq + c] * y[off + i * lq + c];
            drow[i - i0] = d;
          }
          gemm<T>(false, true, rows, jmax, hd, T(1), dy + off + i0 * lq, lq, vp, lk, T(0), ds, jmax);  // dP
          gemm<T>(true, false, jmax, hd, rows, T(1), p, jmax, dy + off + i0 * lq, lq, T(1), dvp, lk);  // dV += P^T dY
          for (int64_t i = 0; i < rows; ++i)  // dS = P (dP - D), scaled
            for (int64_t j = 0; j < jmax; ++j) {
              const T pij = p[i * jmax + j];
              ds[i * jmax + j] = pij == 0 ? T(0) : pij * (ds[i * jmax + j] - drow[i]) * scale;
            }
          gemm<T>(false, false, rows, hd, jmax, T(1), ds, jmax, kp, lk, T(1), dq + off + i0 * lq, lq);  // dQ += dS K
          gemm<T>(true, false, jmax, hd, rows, T(1), ds, jmax, q + off + i0 * lq, lq, T(1), dkp, lk);  // dK += dS^T Q
        }
      }
    }
  }
}

template <class T>
void attention_merge(T* y, T* lse, const T* y2, const T* lse2, int b, int sq, int a, int hd) {
  const int64_t lq = int64_t(a) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t idx = 0; idx < int64_t(b) * a * sq; ++idx) {  // lse index: (bi, h, i)
    const int64_t i = idx % sq, h = (idx / sq) % a, bi = idx / (int64_t(sq) * a);
    const T l1 = lse[idx], l2 = lse2[idx];
    if (std::isinf(l2) && l2 < 0) continue;  // the block adds nothing
    T* yr = y + (bi * sq + i) * lq + h * hd;
    const T* y2r = y2 + (bi * sq + i) * lq + h * hd;
    if (std::isinf(l1) && l1 < 0) {
      for (int c = 0; c < hd; ++c) yr[c] = y2r[c];
      lse[idx] = l2;
      continue;
    }
    const T mx = std::max(l1, l2);
    const T e1 = std::exp(l1 - mx), e2 = std::exp(l2 - mx);
    const T tot = e1 + e2, w1 = e1 / tot, w2 = e2 / tot;
    for (int c = 0; c < hd; ++c) yr[c] = yr[c] * w1 + y2r[c] * w2;
    lse[idx] = mx + std::log(tot);
  }
}

// The fused projection's row: g groups of (r + 2) blocks of hd (r = a/g query heads, key, value).
template <class T>
void qkv_split(T* q, T* k, T* v, const T* qkv, int64_t n, int a, int g, int hd) {
  const int r = a / g;
  const int64_t w = int64_t(a + 2 * g) * hd, lq = int64_t(a) * hd, lk = int64_t(g) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < n; ++row)
    for (int gi = 0; gi < g; ++gi) {
      const T* grp = qkv + row * w + int64_t(gi) * (r + 2) * hd;
      std::copy(grp, grp + int64_t(r) * hd, q + row * lq + int64_t(gi) * r * hd);
      std::copy(grp + int64_t(r) * hd, grp + int64_t(r + 1) * hd, k + row * lk + int64_t(gi) * hd);
      std::copy(grp + int64_t(r + 1) * hd, grp + int64_t(r + 2) * hd, v + row * lk + int64_t(gi) * hd);
    }
}

template <class T>
void qkv_join(T* dqkv, const T* dq, const T* dk, const T* dv, int64_t n, int a, int g, int hd) {
  const int r = a / g;
  const int64_t w = int64_t(a + 2 * g) * hd, lq = int64_t(a) * hd, lk = int64_t(g) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < n; ++row)
    for (int gi = 0; gi < g; ++gi) {
      T* grp = dqkv + row * w + int64_t(gi) * (r + 2) * hd;
      const T* qs = dq + row * lq + int64_t(gi) * r * hd;
      std::copy(qs, qs + int64_t(r) * hd, grp);
      std::copy(dk + row * lk + int64_t(gi) * hd, dk + row * lk + int64_t(gi + 1) * hd, grp + int64_t(r) * hd);
      std::copy(dv + row * lk + int64_t(gi) * hd, dv + row * lk + int64_t(gi + 1) * hd, grp + int64_t(r + 1) * hd);
    }
}

// rope's rotation (llama_ops.cpp) with the angle of positions[row]: the same double-precision
// angle and cos/sin rounded to T, so that rope_rows at positions row mod s equals rope bit for bit.
template <class T>
void rope_rows(T* y, const T* x, const int32_t* positions, int64_t n, int heads, int hd, double theta, int sign) {
  const int half = hd / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = std::pow(theta, -2.0 * i / hd);
  const int64_t width = int64_t(heads) * hd;
#pragma omp parallel
  {
    std::vector<T> cs(half), sn(half);
#pragma omp for schedule(static)
    for (int64_t row = 0; row < n; ++row) {
      for (int i = 0; i < half; ++i) {
        const double ang = double(positions[row]) * inv[i];
        cs[i] = static_cast<T>(std::cos(ang));
        sn[i] = static_cast<T>(sign * std::sin(ang));
      }
      for (int h = 0; h < heads; ++h) {
        const T* xi = x + row * width + int64_t(h) * hd;
        T* yi = y + row * width + int64_t(h) * hd;
        for (int i = 0; i < half; ++i) {
          const T x0 = xi[i], x1 = xi[i + half];
          yi[i] = x0 * cs[i] - x1 * sn[i];
          yi[i + half] = x1 * cs[i] + x0 * sn[i];
        }
      }
    }
  }
}

#define PTDP_INST(T)                                                                                               \
  template void flash_attention_forward<T>(T*, T*, const T*, const T*, const T*, int, int, int, int, int, int,      \
                                           int64_t, int64_t, bool);                                                 \
  template void flash_attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                            int, int, int, int, int, int, int64_t, int64_t, bool);                  \
  template void attention_merge<T>(T*, T*, const T*, const T*, int, int, int, int);                                 \
  template void qkv_split<T>(T*, T*, T*, const T*, int64_t, int, int, int);                                         \
  template void qkv_join<T>(T*, const T*, const T*, const T*, int64_t, int, int, int);                              \
  template void rope_rows<T>(T*, const T*, const int32_t*, int64_t, int, int, double, int);
PTDP_INST(float)
PTDP_INST(double)
#undef PTDP_INST

}  // namespace ptdp::cpu
