// Causal self-attention core on GEMMs: one (batch, head) pair per OpenMP thread, OpenBLAS
// running single-threaded inside (its OpenMP build does so within a parallel region).
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/vec_math.h"

namespace ptdp::cpu {

template <class T>
void attention_forward(T* y, T* probs, const T* qkv, int b, int s, int a, int hd) {
  const int64_t ld = int64_t(3) * a * hd;  // row stride of qkv
  const int64_t hl = int64_t(a) * hd;      // row stride of y
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t pair = 0; pair < int64_t(b) * a; ++pair) {
    int64_t bi = pair / a, head = pair % a;
    const T* q = qkv + bi * s * ld + head * 3 * hd;
    const T* k = q + hd;
    const T* v = q + 2 * hd;
    T* p = probs + pair * int64_t(s) * s;
    gemm<T>(false, true, s, s, hd, scale, q, ld, k, ld, T(0), p, s);
    for (int64_t i = 0; i < s; ++i) {
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
    gemm<T>(false, false, s, hd, s, T(1), p, s, v, ld, T(0), y + bi * s * hl + head * hd, hl);
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dy, const T* qkv, const T* probs, int b, int s, int a,
                        int hd) {
  const int64_t ld = int64_t(3) * a * hd;
  const int64_t hl = int64_t(a) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
  std::vector<T> scratch(static_cast<size_t>(omp_get_max_threads()) * s * s);
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
    T* ds = scratch.data() + static_cast<size_t>(omp_get_thread_num()) * s * s;
    gemm<T>(false, true, s, s, hd, T(1), dyp, hl, v, ld, T(0), ds, s);  // dP = dY V^T
    gemm<T>(true, false, s, hd, s, T(1), p, s, dyp, hl, T(0), dv, ld);  // dV = P^T dY
    for (int64_t i = 0; i < s; ++i) {  // dS = P * (dP - rowsum(dP * P)), scaled
      const T* pr = p + i * s;
      T* dr = ds + i * s;
      T dot = 0;
      for (int64_t j = 0; j <= i; ++j) dot += pr[j] * dr[j];
      for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
      for (int64_t j = i + 1; j < s; ++j) dr[j] = 0;
    }
    gemm<T>(false, false, s, hd, s, T(1), ds, s, k, ld, T(0), dq, ld);  // dQ = dS K
    gemm<T>(true, false, s, hd, s, T(1), ds, s, q, ld, T(0), dk, ld);   // dK = dS^T Q
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int);

}  // namespace ptdp::cpu
