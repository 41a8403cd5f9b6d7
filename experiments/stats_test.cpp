// Mann–Whitney U and the Hodges–Lehmann interval against values computed independently
// (SciPy 1.10 mannwhitneyu, exact and asymptotic with continuity correction; the U tables).
#include "experiments/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
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

// The order statistics are found without storing the m x n differences; they must be exactly the
// sorted differences' (random samples with many ties and negative and positive changes), and U
// from the pooled ranks must be the pair count's.
TEST(RelativeChange, EqualsTheSortedPairwiseDifferencesWithoutStoringThem) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t m = 1 + rng() % 60, n = 1 + rng() % 70;
    std::vector<double> base(m), cur(n);
    for (double& x : base) x = 90 + double(rng() % 25);  // coarse values: ties within and across
    for (double& x : cur) x = 85 + double(rng() % 40) * (trial % 2 ? 1.0 : 0.37);
    std::vector<double> d;
    double u = 0;
    for (double b : base)
      for (double c : cur) {
        d.push_back(std::log(c) - std::log(b));
        u += b > c ? 1.0 : (b == c ? 0.5 : 0.0);
      }
    std::sort(d.begin(), d.end());
    const RelativeChange r = relative_change(base, cur, 0.9);
    const size_t pairs = d.size();
    const double mid = pairs % 2 ? d[pairs / 2] : 0.5 * (d[pairs / 2 - 1] + d[pairs / 2]);
    EXPECT_EQ(r.estimate, std::expm1(mid)) << "trial " << trial;
    // The interval's ends are the k-th smallest and the k-th largest difference for one k.
    bool symmetric_pair = false;
    for (size_t k = 0; k < pairs && !symmetric_pair; ++k)
      symmetric_pair = r.lo == std::expm1(d[k]) && r.hi == std::expm1(d[pairs - 1 - k]);
    EXPECT_TRUE(symmetric_pair) << "trial " << trial;
    EXPECT_EQ(mann_whitney(base, cur).u, u) << "trial " << trial;
  }
}

// 300,000 runs a side (a long history of one configuration): 9e10 pairs, which a stored copy of
// the differences cannot hold; the answer is the constant ratio's.
TEST(RelativeChange, HundredsOfThousandsOfRunsNeedNoPairwiseStorage) {
  std::vector<double> base(300000), cur(300000);
  for (size_t i = 0; i < base.size(); ++i) {
    base[i] = 100 + double(i % 1000) * 1e-3;
    cur[i] = 1.05 * base[i];
  }
  const RelativeChange r = relative_change(base, cur);
  EXPECT_NEAR(r.estimate, 0.05, 1e-9);
  EXPECT_LT(r.lo, 0.05);
  EXPECT_GT(r.hi, 0.05);
  EXPECT_GT(mann_whitney(base, cur).u, -1);
  EXPECT_LT(mann_whitney(base, cur).p, 1e-12);
}

}  // namespace
}  // namespace ptdp
