#include "core/data/numpy_sum.h"

namespace ptdp {
namespace {

double pairwise(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

}  // namespace

double numpy_sum(std::span<const double> a) { return 0.0 + pairwise(a.data(), a.size()); }

std::vector<double> numpy_normalize(std::span<const double> w) {
  const double sum = numpy_sum(w);
  std::vector<double> out;
  out.reserve(w.size());
  for (double v : w) out.push_back(v / sum);
  return out;
}

}  // namespace ptdp
