// Embedding lookup and the vocab-shardable pieces of cross-entropy.
#include <omp.h>

#include <cmath>
#include <limits>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/vec_math.h"

namespace ptdp::cpu {

template <class T>
void embedding_forward(T* x, const int32_t* tok, const T* wte, int64_t rows, int64_t vocab_start,
                       const T* wpe, int64_t n, int64_t h, int s) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    int64_t id = int64_t(tok[r]) - vocab_start;
    bool local = id >= 0 && id < rows;
    const T* e = local ? wte + id * h : nullptr;
    const T* pos = wpe ? wpe + (r % s) * h : nullptr;
    T* xr = x + r * h;
    for (int64_t i = 0; i < h; ++i) xr[i] = (e ? e[i] : T(0)) + (pos ? pos[i] : T(0));
  }
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dx, const int32_t* tok, int64_t rows,
                        int64_t vocab_start, int64_t n, int64_t h, int s) {
  // Parallel over hidden columns: every thread walks all rows, so repeated tokens never race.
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (h + nt - 1) / nt, c0 = id * chunk, c1 = c0 + chunk < h ? c0 + chunk : h;
    for (int64_t r = 0; r < n; ++r) {
      const T* d = dx + r * h;
      int64_t t = int64_t(tok[r]) - vocab_start;
      if (t >= 0 && t < rows) {
        T* e = dwte + t * h;
        for (int64_t i = c0; i < c1; ++i) e[i] += d[i];
      }
      if (dwpe) {
        T* p = dwpe + (r % s) * h;
        for (int64_t i = c0; i < c1; ++i) p[i] += d[i];
      }
    }
  }
}

template <class T>
void xent_row_max(T* max, const T* logits, int64_t n, int64_t v, int64_t v_valid) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* l = logits + r * v;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < v_valid; ++j) m = l[j] > m ? l[j] : m;
    max[r] = m;
  }
}

template <class T>
void xent_sum_exp(T* se, const T* logits, const T* max, int64_t n, int64_t v, int64_t v_valid) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* l = logits + r * v;
    T tot = 0;
    for (int64_t j = 0; j < v_valid; ++j) tot += exp_of(l[j] - max[r]);
    se[r] = tot;
  }
}

template <class T>
void xent_target_logit(T* tgt, const T* logits, const int32_t* targets, int64_t n, int64_t v,
                       int64_t vocab_start, int64_t v_valid) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    int64_t t = int64_t(targets[r]) - vocab_start;
    tgt[r] = (t >= 0 && t < v_valid) ? logits[r * v + t] : T(0);
  }
}

template <class T>
void xent_loss(T* loss, const T* max, const T* se, const T* tgt, int64_t n) {
  for (int64_t r = 0; r < n; ++r) loss[r] = std::log(se[r]) + max[r] - tgt[r];
}

template <class T>
void xent_backward(T* dlogits, const T* logits, const T* max, const T* se, const int32_t* targets,
                   int64_t n, int64_t v, int64_t vocab_start, int64_t v_valid, double scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* l = logits + r * v;
    T* d = dlogits + r * v;
    T inv = T(1) / se[r], sc = T(scale);
    for (int64_t j = 0; j < v_valid; ++j) d[j] = sc * exp_of(l[j] - max[r]) * inv;
    for (int64_t j = v_valid; j < v; ++j) d[j] = 0;
    int64_t t = int64_t(targets[r]) - vocab_start;
    if (t >= 0 && t < v_valid) d[t] -= sc;
  }
}

#define PTDP_INST(T)                                                                                     \
  template void embedding_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t, const T*, int64_t, int64_t, \
                                     int);                                                                \
  template void embedding_backward<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t, int); \
  template void xent_row_max<T>(T*, const T*, int64_t, int64_t, int64_t);                                 \
  template void xent_sum_exp<T>(T*, const T*, const T*, int64_t, int64_t, int64_t);                       \
  template void xent_target_logit<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t);   \
  template void xent_loss<T>(T*, const T*, const T*, const T*, int64_t);                                  \
  template void xent_backward<T>(T*, const T*, const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, \
                                 int64_t, double);
PTDP_INST(float)
PTDP_INST(double)
#undef PTDP_INST

}  // namespace ptdp::cpu
