// LayerNorm and GeLU (tanh approximation), forward and backward.
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/vec_math.h"

namespace ptdp::cpu {

template <class T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* g, const T* b, int64_t n,
                       int64_t c, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * c;
    double m = 0;
    for (int64_t i = 0; i < c; ++i) m += xr[i];
    m /= c;
    double var = 0;
    for (int64_t i = 0; i < c; ++i) {
      double d = xr[i] - m;
      var += d * d;
    }
    var /= c;
    T rs = static_cast<T>(1.0 / std::sqrt(var + eps));
    T mt = static_cast<T>(m);
    T* yr = y + r * c;
    for (int64_t i = 0; i < c; ++i) yr[i] = (xr[i] - mt) * rs * g[i] + b[i];
    mean[r] = mt;
    rstd[r] = rs;
  }
}

template <class T>
void layernorm_backward(T* dx, T* dg, T* db, const T* dy, const T* x, const T* g, const T* mean,
                        const T* rstd, int64_t n, int64_t c) {
  int nt = omp_get_max_threads();
  std::vector<T> part(static_cast<size_t>(nt) * 2 * c, T(0));  // per-thread dg | db partials
#pragma omp parallel
  {
    T* pg = part.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * c;
    T* pb = pg + c;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      T* dxr = dx + r * c;
      T m = mean[r], rs = rstd[r];
      T dnorm_mean = 0, dnorm_norm_mean = 0;
      for (int64_t i = 0; i < c; ++i) {
        T norm = (xr[i] - m) * rs;
        T dnorm = dyr[i] * g[i];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= c;
      dnorm_norm_mean /= c;
      for (int64_t i = 0; i < c; ++i) {
        T norm = (xr[i] - m) * rs;
        T dnorm = dyr[i] * g[i];
        dxr[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rs;
        pg[i] += dyr[i] * norm;
        pb[i] += dyr[i];
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const T* pg = part.data() + static_cast<size_t>(t) * 2 * c;
    for (int64_t i = 0; i < c; ++i) {
      dg[i] += pg[i];
      db[i] += pg[c + i];
    }
  }
}

namespace {
constexpr double kGeluC = 0.79788456080286535588;  // sqrt(2/pi)
}  // namespace

// The tanh approximation of GeLU, 0.5·v·(1 + tanh(u)) with u = sqrt(2/pi)·(v + 0.044715·v³),
// computed as v·σ(2u) = v / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2σ(2u)), one exp
// and no cancellation in 1 + tanh(u) for negative u; the float loop vectorises.
template <class T>
void gelu_forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = T(kGeluC) * (v + T(0.044715) * v * v * v);
    y[i] = v / (T(1) + exp_of(T(-2) * u));
  }
}

// d/dv v·σ(2u) = s + 2·v·s·(1 - s)·du/dv with s = σ(2u), 1 - s = e·s, e = exp(-2u).
template <class T>
void gelu_backward(T* dx, const T* x, const T* dy, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = T(kGeluC) * (v + T(0.044715) * v * v * v);
    const T e = exp_of(T(-2) * u);
    const T s = T(1) / (T(1) + e);
    const T du = T(kGeluC) * (T(1) + T(3 * 0.044715) * v * v);
    dx[i] = dy[i] * (s + T(2) * v * s * (e * s) * du);
  }
}

#define PTDP_INST(T)                                                                                  \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, \
                                      int64_t);                                                        \
  template void gelu_forward<T>(T*, const T*, int64_t);                                                \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);
PTDP_INST(float)
PTDP_INST(double)
#undef PTDP_INST

}  // namespace ptdp::cpu
