#include "experiments/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <stdexcept>

namespace ptdp {

namespace {

constexpr size_t kExactLimit = 100;  // m + n up to which the U distribution is enumerated

// P(U = k) for k = 0..m*n under the null hypothesis (no ties): the number of m-subsets of ranks
// 1..m+n with rank sum k + m(m+1)/2, over C(m+n, m).
std::vector<double> u_distribution(size_t m, size_t n) {
  const size_t total = m * n;
  // ways[j][u]: j items of the first sample chosen among the ranks seen so far, with U = u (each
  // chosen item counts the unchosen ones below it).
  std::vector<std::vector<double>> ways(m + 1, std::vector<double>(total + 1, 0.0));
  ways[0][0] = 1;
  for (size_t rank = 0; rank < m + n; ++rank)
    for (size_t j = std::min(m, rank + 1); j >= 1; --j) {
      const size_t below = rank - (j - 1);  // unchosen items below this one
      if (below > n) continue;
      for (size_t u = total; u + 1 > below; --u) ways[j][u] += ways[j - 1][u - below];
    }
  double sum = 0;
  for (double w : ways[m]) sum += w;
  std::vector<double> p(total + 1);
  for (size_t u = 0; u <= total; ++u) p[u] = ways[m][u] / sum;
  return p;
}

double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

void need_samples(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  if (a.empty() || b.empty()) throw std::invalid_argument(std::string(what) + ": each sample needs a value");
}

// The m x n differences log(cur_j) - log(base_i) without storing them: order statistics by
// bisection over the doubles' ordered bit patterns (at most 64 counts of O(m + n) each), so the
// memory is O(m + n) whatever the number of pairs. Each difference is the same double a stored
// copy would hold, so the k-th is exactly what sorting them gives.
class PairwiseDifferences {
 public:
  PairwiseDifferences(const std::vector<double>& base, const std::vector<double>& cur) {
    for (const auto* v : {&base, &cur})
      for (double x : *v)
        if (!(x > 0) || !std::isfinite(x))
          throw std::invalid_argument("relative_change: values must be positive and finite");
    for (double x : base) a_.push_back(std::log(x));
    for (double x : cur) c_.push_back(std::log(x));
    std::sort(a_.begin(), a_.end());
    std::sort(c_.begin(), c_.end());
  }
  size_t size() const { return a_.size() * c_.size(); }
  // The k-th smallest difference, k from 0.
  double kth(size_t k) const {
    uint64_t lo = key(c_.front() - a_.back()), hi = key(c_.back() - a_.front());  // min, max
    if (count_at_most(value(lo)) > k) return value(lo) + 0.0;  // + 0.0: never -0
    while (hi - lo > 1) {  // count(<= value(lo)) <= k < count(<= value(hi))
      const uint64_t mid = lo + (hi - lo) / 2;
      (count_at_most(value(mid)) > k ? hi : lo) = mid;
    }
    return value(hi) + 0.0;
  }

 private:
  // Pairs with c_j - a_i <= t: the rounded difference is monotone in each operand, so the
  // boundary index in c only grows as a_i grows.
  size_t count_at_most(double t) const {
    size_t total = 0, j = 0;
    for (size_t i = 0; i < a_.size(); ++i) {  // a ascending: the boundary in c ascends
      while (j < c_.size() && c_[j] - a_[i] <= t) ++j;
      total += j;
    }
    return total;
  }
  // Doubles (not NaN) to unsigned integers in the same order, and back.
  static uint64_t key(double x) {
    uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : (u | (uint64_t(1) << 63));
  }
  static double value(uint64_t k) {
    const uint64_t u = (k >> 63) ? (k & ~(uint64_t(1) << 63)) : ~k;
    double x;
    std::memcpy(&x, &u, sizeof x);
    return x;
  }
  std::vector<double> a_, c_;
};

}  // namespace

UTest mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  need_samples(a, b, "mann_whitney");
  UTest t;
  // U from the ranks of the pooled sample (mid-ranks for ties): O((m + n) log(m + n)), so that
  // hundreds of thousands of runs per side need no m x n pass.
  std::vector<std::pair<double, bool>> pooled;  // (value, from a)
  pooled.reserve(a.size() + b.size());
  for (double x : a) pooled.emplace_back(x, true);
  for (double y : b) pooled.emplace_back(y, false);
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_a = 0, ties = 0;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    size_t in_a = 0;
    for (; j < pooled.size() && pooled[j].first == pooled[i].first; ++j) in_a += pooled[j].second;
    const double c = double(j - i), mid_rank = 0.5 * double(i + 1 + j);  // ranks i+1 .. j
    rank_sum_a += double(in_a) * mid_rank;
    ties += c * c * c - c;
    i = j;
  }
  t.u = rank_sum_a - double(a.size()) * double(a.size() + 1) / 2;
  const double m = double(a.size()), n = double(b.size()), big_n = m + n;
  if (ties == 0 && a.size() + b.size() <= kExactLimit) {
    const std::vector<double> p = u_distribution(a.size(), b.size());
    const auto k = size_t(std::lround(t.u));
    double le = 0, ge = 0;
    for (size_t u = 0; u < p.size(); ++u) (u <= k ? le : ge) += p[u];
    ge += p[k];  // P(U >= k) includes k
    t.p = std::min(1.0, 2 * std::min(le, ge));
    t.exact = true;
    return t;
  }
  const double mu = m * n / 2;
  const double var = m * n / 12 * ((big_n + 1) - ties / (big_n * (big_n - 1)));
  if (var <= 0) return t;  // every value equal: no evidence of a difference
  const double z = std::max(0.0, std::fabs(t.u - mu) - 0.5) / std::sqrt(var);
  t.p = std::min(1.0, 2 * normal_upper_tail(z));
  return t;
}

RelativeChange relative_change(const std::vector<double>& base, const std::vector<double>& cur, double confidence) {
  need_samples(base, cur, "relative_change");
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("relative_change: confidence must be in (0, 1)");
  PairwiseDifferences d(base, cur);
  const size_t pairs = d.size();
  RelativeChange r;
  const double mid = pairs % 2 ? d.kth(pairs / 2) : 0.5 * (d.kth(pairs / 2 - 1) + d.kth(pairs / 2));
  r.estimate = std::expm1(mid);
  // The interval [d_(k), d_(pairs+1-k)] covers with probability 1 - 2 P(U <= k-1): the largest
  // k >= 1 that still reaches `confidence` (k = 1, the whole range, when none does).
  const size_t m = base.size(), n = cur.size();
  size_t k = 1;
  double coverage = 0;
  if (m + n <= kExactLimit) {
    const std::vector<double> p = u_distribution(m, n);
    double cdf = p[0];
    coverage = 1 - 2 * cdf;
    for (size_t kk = 2; kk <= (pairs + 1) / 2; ++kk) {
      const double next = 1 - 2 * (cdf + p[kk - 1]);
      if (next < confidence) break;
      cdf += p[kk - 1];
      coverage = next;
      k = kk;
    }
  } else {
    const double sd = std::sqrt(double(m) * n * (m + n + 1) / 12.0);
    // Normal quantile by bisection on the upper tail (no table needed).
    double lo = 0, hi = 10;
    for (int i = 0; i < 100; ++i) {
      const double z = 0.5 * (lo + hi);
      (normal_upper_tail(z) > (1 - confidence) / 2 ? lo : hi) = z;
    }
    const double c = std::floor(double(pairs) / 2 - hi * sd);
    k = size_t(std::max(1.0, c + 1));
    coverage = confidence;
  }
  r.lo = std::expm1(d.kth(k - 1));
  r.hi = std::expm1(d.kth(pairs - k));
  r.confidence = coverage;
  return r;
}

}  // namespace ptdp
