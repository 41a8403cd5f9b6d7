// Mann–Whitney U and the Hodges–Lehmann interval against values computed independently
// (SciPy 1.10 mannwhitneyu, exact and asymptotic with continuity correction; the U tables).
#include "experiments/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ptdp {
namespace {

TEST(MannWhitney, ExactSmallSamplesMatchScipy) {
  UTest t = mann_whitney({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.u, 0);
  EXPECT_NEAR(t.p, 0.1, 1e-12);
  t = mann_whitney({1.0, 2.5, 3.1, 7.2, 8.0}, {4, 5, 6, 9, 10, 11});
  EXPECT_EQ(t.u, 6);
  EXPECT_NEAR(t.p, 0.12554112554112554, 1e-12);
  // Symmetric: swapping the samples gives U' = mn - U and the same p.
  UTest s = mann_whitney({4, 5, 6, 9, 10, 11}, {1.0, 2.5, 3.1, 7.2, 8.0});
  EXPECT_EQ(s.u, 24);
  EXPECT_NEAR(s.p, t.p, 1e-12);
}

TEST(MannWhitney, TiesUseTheCorrectedNormalApproximation) {
  UTest t = mann_whitney({1, 2, 2, 3, 5, 8}, {2, 4, 4, 6, 7, 9, 9});
  EXPECT_FALSE(t.exact);
  EXPECT_EQ(t.u, 10);
  EXPECT_NEAR(t.p, 0.1304022381333741, 1e-9);
}

TEST(MannWhitney, IdenticalSamplesGiveNoEvidence) {
  EXPECT_EQ(mann_whitney({5, 5, 5}, {5, 5}).p, 1.0);
  EXPECT_THROW(mann_whitney({}, {1}), std::invalid_argument);
}

TEST(RelativeChange, AConstantRatioIsItsOwnEstimateAndInterval) {
  RelativeChange r = relative_change({100, 100, 100}, {110, 110, 110});
  EXPECT_NEAR(r.estimate, 0.10, 1e-12);
  EXPECT_NEAR(r.lo, 0.10, 1e-12);
  EXPECT_NEAR(r.hi, 0.10, 1e-12);
}

// m = n = 5: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252 (the U table's critical value 2), so
// the 95% interval runs from the 3rd to the 23rd of the 25 ordered pairwise log ratios.
TEST(RelativeChange, IntervalBoundsAreTheOrderStatisticsTheUTableGives) {
  const std::vector<double> base = {10, 11, 12, 13, 14}, cur = {12, 13.5, 15, 16, 20};
  std::vector<double> d;
  for (double b : base)
    for (double c : cur) d.push_back(std::log(c / b));
  std::sort(d.begin(), d.end());
  RelativeChange r = relative_change(base, cur, 0.95);
  EXPECT_NEAR(r.lo, std::expm1(d[2]), 1e-12);
  EXPECT_NEAR(r.hi, std::expm1(d[22]), 1e-12);
  EXPECT_NEAR(r.estimate, std::expm1(d[12]), 1e-12);
  EXPECT_NEAR(r.confidence, 1 - 8.0 / 252, 1e-12);
}

TEST(RelativeChange, TooFewSamplesForTheConfidenceSayHowMuchTheyReach) {
  RelativeChange r = relative_change({10, 11}, {12, 13}, 0.95);  // P(U = 0) = 1/6
  EXPECT_NEAR(r.confidence, 1 - 2.0 / 6, 1e-12);
  EXPECT_NEAR(r.lo, 12.0 / 11 - 1, 1e-12);
  EXPECT_NEAR(r.hi, 13.0 / 10 - 1, 1e-12);
  EXPECT_THROW(relative_change({0}, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace ptdp
