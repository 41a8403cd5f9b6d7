// LLaMA's operations: RMSNorm, rotary position embeddings and SwiGLU, forward and backward.
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/vec_math.h"

namespace ptdp::cpu {

// y = x · rstd · g with rstd = 1/sqrt(mean(x²) + eps) per row.
template <class T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* g, int64_t n, int64_t c, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * c;
    double ms = 0;
    for (int64_t i = 0; i < c; ++i) ms += double(xr[i]) * xr[i];
    const T rs = static_cast<T>(1.0 / std::sqrt(ms / c + eps));
    T* yr = y + r * c;
    for (int64_t i = 0; i < c; ++i) yr[i] = xr[i] * rs * g[i];
    rstd[r] = rs;
  }
}

// With u = x·rstd and e = dy·g: dx += rstd · (e − u · mean(e·u)), dg += Σ_rows dy·u.
template <class T>
void rmsnorm_backward(T* dx, T* dg, const T* dy, const T* x, const T* g, const T* rstd, int64_t n, int64_t c) {
  const int nt = omp_get_max_threads();
  std::vector<T> part(static_cast<size_t>(nt) * c, T(0));  // per-thread dg partials
#pragma omp parallel
  {
    T* pg = part.data() + static_cast<size_t>(omp_get_thread_num()) * c;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      T* dxr = dx + r * c;
      const T rs = rstd[r];
      T eu = 0;
      for (int64_t i = 0; i < c; ++i) eu += dyr[i] * g[i] * xr[i] * rs;
      eu /= c;
      for (int64_t i = 0; i < c; ++i) {
        const T u = xr[i] * rs;
        dxr[i] += (dyr[i] * g[i] - u * eu) * rs;
        pg[i] += dyr[i] * u;
      }
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t i = 0; i < c; ++i) dg[i] += part[static_cast<size_t>(t) * c + i];
}

// Rotary embedding of q and k in qkv [b*s, a*3*hd] (per head q | k | v), position = row mod s,
// Megatron's non-interleaved form: element i < hd/2 pairs with i + hd/2, angle pos·θ^(−2i/hd).
// sign = −1 rotates back (the transpose: the backward pass). v is copied.
template <class T>
void rope(T* y, const T* x, int64_t n, int s, int a, int hd, double theta, int sign) {
  const int half = hd / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = std::pow(theta, -2.0 * i / hd);
  // The angles depend on the position and frequency only: one table of s x half, not one sin and
  // cos per element (bit for bit the same values).
  std::vector<T> cos_t(size_t(s) * half), sin_t(size_t(s) * half);
  for (int p = 0; p < s; ++p)
    for (int i = 0; i < half; ++i) {
      const double ang = double(p) * inv[i];
      cos_t[size_t(p) * half + i] = static_cast<T>(std::cos(ang));
      sin_t[size_t(p) * half + i] = static_cast<T>(sign * std::sin(ang));
    }
  const int64_t width = int64_t(3) * a * hd;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* cr = cos_t.data() + (r % s) * half;
    const T* sr = sin_t.data() + (r % s) * half;
    const T* xr = x + r * width;
    T* yr = y + r * width;
    for (int h = 0; h < a; ++h) {
      for (int part = 0; part < 2; ++part) {  // q, k
        const T* xi = xr + (int64_t(h) * 3 + part) * hd;
        T* yi = yr + (int64_t(h) * 3 + part) * hd;
        for (int i = 0; i < half; ++i) {
          const T cs = cr[i], sn = sr[i];
          const T x0 = xi[i], x1 = xi[i + half];
          yi[i] = x0 * cs - x1 * sn;
          yi[i + half] = x1 * cs + x0 * sn;
        }
      }
      const T* xv = xr + (int64_t(h) * 3 + 2) * hd;
      T* yv = yr + (int64_t(h) * 3 + 2) * hd;
      if (yv != xv)
        for (int i = 0; i < hd; ++i) yv[i] = xv[i];
    }
  }
}

// x [n, 2f] = gate | up; y [n, f] = silu(gate) · up.
template <class T>
void swiglu_forward(T* y, const T* x, int64_t n, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* gr = x + r * 2 * f;
    const T* ur = gr + f;
    T* yr = y + r * f;
#pragma omp simd
    for (int64_t i = 0; i < f; ++i) yr[i] = gr[i] / (T(1) + exp_of(-gr[i])) * ur[i];
  }
}

// dgate = dy·up·σ(g)·(1 + g·(1 − σ(g))), dup = dy·silu(g).
template <class T>
void swiglu_backward(T* dx, const T* x, const T* dy, int64_t n, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* gr = x + r * 2 * f;
    const T* ur = gr + f;
    const T* dyr = dy + r * f;
    T* dgr = dx + r * 2 * f;
    T* dur = dgr + f;
#pragma omp simd
    for (int64_t i = 0; i < f; ++i) {
      const T g = gr[i];
      const T sg = T(1) / (T(1) + exp_of(-g));
      dgr[i] = dyr[i] * ur[i] * sg * (T(1) + g * (T(1) - sg));
      dur[i] = dyr[i] * g * sg;
    }
  }
}

#define PTDP_INST(T)                                                                                    \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);              \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t); \
  template void rope<T>(T*, const T*, int64_t, int, int, int, double, int);                            \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t);                                     \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);
PTDP_INST(float)
PTDP_INST(double)
#undef PTDP_INST

}  // namespace ptdp::cpu
