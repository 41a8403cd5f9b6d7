#include "core/testing/gradcheck.h"

#include <cmath>

#include "core/common/rng.h"

namespace ptdp::testing {

Tensor randn(Shape shape, uint64_t seed, double std) {
  Tensor t = Tensor::empty(std::move(shape), DType::F64);
  fill_normal(t, seed, std);
  return t;
}

void fill_normal(Tensor& t, uint64_t seed, double std) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = std * normal01(seed, 7, i);
    if (t.dtype() == DType::F64) t.data<double>()[i] = v;
    else t.data<float>()[i] = static_cast<float>(v);
  }
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

double grad_rel_error(const std::function<double()>& objective, Tensor x, const Tensor& analytic,
                      int64_t max_checks, double eps) {
  double* p = x.data<double>();
  const double* g = analytic.data<double>();
  const int64_t n = x.numel();
  const int64_t stride = n <= max_checks ? 1 : (n + max_checks - 1) / max_checks;
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; i += stride) {
    const double old = p[i];
    p[i] = old + eps;
    const double up = objective();
    p[i] = old - eps;
    const double down = objective();
    p[i] = old;
    const double num = (up - down) / (2 * eps);
    diff2 += (g[i] - num) * (g[i] - num);
    ref2 += num * num;
  }
  return std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
}

}  // namespace ptdp::testing
