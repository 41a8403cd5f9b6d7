// Element-wise arithmetic, f64 reductions and the AdamW update.
#include <cmath>

#include "core/backend/cpu/kernels.h"

namespace ptdp::cpu {

template <class T>
void add(T* y, const T* a, const T* b, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <class T>
void add_inplace(T* y, const T* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template <class T>
void scale_inplace(T* y, double alpha, int64_t n) {
  T a = static_cast<T>(alpha);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

template <class T>
double sum(const T* x, int64_t n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <class T>
double sum_squares(const T* x, int64_t n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

void adamw(float* p, const float* g, float* m, float* v, int64_t n, double lr, double b1, double b2,
           double eps, double wd, int64_t step) {
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, double(step))));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, double(step))));
  const float fb1 = float(b1), fb2 = float(b2), flr = float(lr), feps = float(eps);
  const float decay = static_cast<float>(1.0 - lr * wd);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float mi = fb1 * m[i] + (1.0f - fb1) * gi;
    float vi = fb2 * v[i] + (1.0f - fb2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi * c1, vhat = vi * c2;
    p[i] = p[i] * decay - flr * mhat / (std::sqrt(vhat) + feps);
  }
}

#define PTDP_INST(T)                                                \
  template void add<T>(T*, const T*, const T*, int64_t);            \
  template void add_inplace<T>(T*, const T*, int64_t);              \
  template void scale_inplace<T>(T*, double, int64_t);              \
  template double sum<T>(const T*, int64_t);                        \
  template double sum_squares<T>(const T*, int64_t);
PTDP_INST(float)
PTDP_INST(double)
#undef PTDP_INST

}  // namespace ptdp::cpu
