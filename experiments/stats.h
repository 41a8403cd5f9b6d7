// Two-sample statistics for regression tracking: the Mann–Whitney U test (as Google Benchmark's
// compare tool uses) and the Hodges–Lehmann estimate of a relative change with its
// distribution-free confidence interval. Samples are positive measurements (throughputs, times).
#pragma once
#include <vector>

#include "core/common/median.h"

namespace ptdp {

struct UTest {
  double u = 0;   // U of the first sample: pairs (a_i, b_j) with a_i > b_j, ties counting 1/2
  double p = 1;   // two-sided p-value
  bool exact = false;  // exact distribution (small samples without ties) or normal approximation
};

// Needs at least one value in each sample; throws std::invalid_argument otherwise.
UTest mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

struct RelativeChange {
  double estimate = 0;  // median over pairs of cur_j / base_i, minus 1 (0.1: 10% higher)
  double lo = 0, hi = 0;  // confidence interval of the same quantity
  double confidence = 0;  // achieved coverage (discrete: at least the requested one when possible)
};

// Hodges–Lehmann on log ratios: the interval is bounded by the order statistics of the pairwise
// log ratios that the U distribution gives (Lehmann 1975, ch. 2). Values must be > 0.
RelativeChange relative_change(const std::vector<double>& base, const std::vector<double>& cur,
                               double confidence = 0.95);

}  // namespace ptdp
