// The shapes of the paper's Figures 11-18 with the a100-selene profile, point by point against
// results/paper/figures.csv; every test prints paper, simulated and error per point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using namespace ptdp::sim::testing;

struct Point {
  std::string x;
  double paper = 0, sim = 0;
  bool fits = true;
};
using Series = std::map<std::string, std::vector<Point>>;

// Simulates every point of `figure`, prints the comparison, returns the points by series.
Series run_figure(const std::string& figure) {
  Series out;
  const auto pts = read_figure(figure);
  EXPECT_FALSE(pts.empty()) << figure;
  double sum_abs = 0;
  for (const auto& p : pts) {
    const FigurePointSetup setup = figure_point(figure, p.series, p.x);
    const SimResult r = simulate(setup.cfg, selene());
    const double sim = setup.sequences_per_s ? r.seq_per_s : r.tflops_per_gpu;
    out[p.series].push_back({p.x, p.value, sim, r.memory.fits});
    const double err = pct_error(sim, p.value);
    sum_abs += std::abs(err);
    fmt::print("{} | {:<28} | {:>8} | paper {:>6.1f} | sim {:>6.1f} | {:>+6.1f}% | bubble {:.3f}{}\n", figure,
               p.series, p.x, p.value, sim, err, r.bubble_fraction, r.memory.fits ? "" : " | out of memory");
  }
  fmt::print("{} mean absolute error {:.1f}% over {} points\n", figure, sum_abs / pts.size(), pts.size());
  return out;
}

std::vector<double> sims(const std::vector<Point>& v) {
  std::vector<double> r;
  for (const auto& p : v) r.push_back(p.sim);
  return r;
}

TEST(SimFigures, Fig11FallsWithPipelineDepthAtSmallBatchAndStaysFlatAtLarge) {
  Series s = run_figure("fig11");
  const auto small = sims(s.at("Batch size = 8")), large = sims(s.at("Batch size = 128"));
  ASSERT_EQ(small.size(), 4u);
  for (size_t i = 1; i < small.size(); ++i) EXPECT_LT(small[i], small[i - 1]) << "B=8, point " << i;
  const double drop_small = 1 - small.back() / small.front(), drop_large = 1 - large.back() / large.front();
  EXPECT_GT(drop_small, 0.3);        // the paper: 165 -> 87 (-47%)
  EXPECT_LT(std::abs(drop_large), 0.1);  // the paper: 175 -> 161 (-8%)
}

TEST(SimFigures, Fig12InterleavedBeatsNonInterleavedAtEveryBatch) {
  Series s = run_figure("fig12");
  const auto& a = s.at("Interleaved");
  const auto& b = s.at("Non-interleaved");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_GT(a[i].sim, b[i].sim) << "B=" << a[i].x;
}

const Point& at(const std::vector<Point>& pts, const std::string& x) {
  for (const auto& p : pts)
    if (p.x == x) return p;
  throw std::runtime_error("no point " + x);
}

double best(const std::vector<Point>& pts) {
  double b = 0;
  for (const auto& p : pts) b = std::max(b, p.sim);
  return b;
}

// The paper: (8, 8) is best at both batch sizes; at B = 128 (16, 4) is 2% behind it. The model
// puts (8, 8) first at B = 32 and (8, 8) and (16, 4) level (within 1%) at B = 128: a 4-way tensor
// group wastes less on all-reduces and replicated element-wise work, a 16-deep pipeline more on
// the bubble, and the two nearly cancel. Tensor groups across nodes (t = 16, 32) and the 32-deep
// pipeline lose clearly at both batch sizes, as in the paper.
TEST(SimFigures, Fig13PeaksAtEightWayTensorAndEightWayPipeline) {
  Series s = run_figure("fig13");
  const auto& small = s.at("Batch size = 32");
  const auto& large = s.at("Batch size = 128");
  EXPECT_EQ(at(small, "(8, 8)").sim, best(small));
  EXPECT_GE(at(large, "(8, 8)").sim, 0.99 * best(large));
  for (const auto* pts : {&small, &large})
    for (const char* x : {"(2, 32)", "(4, 16)", "(32, 2)"})
      EXPECT_LT(at(*pts, x).sim, 0.97 * at(*pts, "(8, 8)").sim) << x;
}

TEST(SimFigures, Fig14FallsAsPipelineParallelismReplacesDataParallelism) {
  Series s = run_figure("fig14");
  for (const auto& [name, pts] : s)
    for (size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i].sim, pts[i - 1].sim) << name << " at " << pts[i].x;
}

TEST(SimFigures, Fig15FallsAsTensorParallelismReplacesDataParallelism) {
  Series s = run_figure("fig15");
  for (const auto& [name, pts] : s)
    for (size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i].sim, pts[i - 1].sim) << name << " at " << pts[i].x;
}

// The paper: b = 2 is best at both batch sizes. The model agrees at B = 128; at B = 512 it puts
// b = 2 and b = 4 level (within 1%): larger micro-batches make GEMMs more efficient (fewer
// partial waves) and amortise per-micro-batch costs, which the longer bubble (m = B/b) offsets.
// The paper's 4-6% drop per sample from b = 2 to b = 4 has no counterpart in the cost model.
TEST(SimFigures, Fig16BestMicroBatchIsTwo) {
  Series s = run_figure("fig16");
  const auto& small = s.at("Batch size = 128");
  const auto& large = s.at("Batch size = 512");
  EXPECT_EQ(at(small, "2").sim, best(small));
  EXPECT_GE(at(large, "2").sim, 0.99 * best(large));
  for (const auto* pts : {&small, &large}) {
    EXPECT_GT(at(*pts, "2").sim, at(*pts, "1").sim);
    EXPECT_GT(at(*pts, "2").sim, at(*pts, "8").sim);
  }
}

TEST(SimFigures, Fig17RecomputeIsSlowerAtSmallBatchButItsLargerBatchesWinOverall) {
  Series s = run_figure("fig17");
  const auto& with = s.at("Act. recomputation");
  const auto& without = s.at("W/o act. recomputation");
  double best_without = 0, best_with = 0;
  for (const auto& w : without) {
    EXPECT_TRUE(w.fits) << "B=" << w.x << " without recomputation should fit";
    best_without = std::max(best_without, w.sim);
    for (const auto& r : with)
      if (r.x == w.x) {
        EXPECT_LT(r.sim, w.sim) << "B=" << w.x;
      }
  }
  for (const auto& r : with) {
    EXPECT_TRUE(r.fits) << "B=" << r.x;
    best_with = std::max(best_with, r.sim);
  }
  // Without recomputation the next batch (B = 16) no longer fits; with it, B = 256 does.
  const FigurePointSetup next = figure_point("fig17", "W/o act. recomputation", "16");
  const SimResult oom = simulate(next.cfg, selene());
  fmt::print("fig17 | without recomputation, B=16: {}\n", oom.memory.describe(selene().device));
  EXPECT_FALSE(oom.memory.fits);
  EXPECT_GT(best_with, 1.5 * best_without);  // the paper: 7.8 vs 3.9 sequences/s
}

TEST(SimFigures, Fig18ScatterGatherBeatsUnoptimisedAtEveryBatch) {
  Series s = run_figure("fig18");
  const auto& a = s.at("Scatter/gather optimization");
  const auto& b = s.at("Unoptimized");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_GT(a[i].sim, b[i].sim) << "B=" << a[i].x;
}

}  // namespace
}  // namespace ptdp::sim
