// The simulator against the paper's Table 2 (PTD-P against DeepSpeed ZeRO-3 without model
// parallelism, 175B and 530B models on 384 ... 2240 A100s, the global batch fixed): TFLOP/s per
// GPU within 10% on every row and 5% on average, the ranking at every GPU count, and the training
// days for 300B tokens by Eq. (4); prints the comparison and ZeRO-3's breakdown.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/accounting/flops.h"
#include "core/sim/testing/paper_data.h"
#include "core/sim/training_time.h"

namespace ptdp::sim {
namespace {

using namespace ptdp::sim::testing;

struct Row {
  Table2Row paper;
  RunConfig cfg;
  SimResult sim;
  double days = 0;
};

std::vector<Row> simulate_table2() {
  std::vector<Row> out;
  for (const Table2Row& p : read_table2()) {
    Row r{p, table2_run(p.scheme, p.params_b, p.gpus, p.global_batch, p.micro_batch), {}, 0};
    r.sim = simulate(r.cfg, selene());
    r.days = training_days_eq4(300e9, params_exact(r.cfg.model), p.gpus, r.sim.tflops_per_gpu * 1e12);
    out.push_back(r);
  }
  return out;
}

TEST(SimTable2, EveryRowWithinTenPercentOfThePaperAndFivePercentOnAverage) {
  const auto rows = simulate_table2();
  ASSERT_EQ(rows.size(), 12u);
  double sum_abs = 0;
  fmt::print("{:<7} {:>6} {:>5} {:>2} {:>5} {:>6} {:>7} {:>7} | {:>5} {:>6} {:>6} | {:>7} {:>7} {:>7} {:>6}\n", "scheme",
             "params", "GPUs", "b", "B", "paper", "sim", "err%", "days", "sim", "err%", "iter s", "compute",
             "comm", "mem GB");
  for (const Row& r : rows) {
    const double err = pct_error(r.sim.tflops_per_gpu, r.paper.tflops);
    const double derr = pct_error(r.days, r.paper.days);
    sum_abs += std::abs(err);
    fmt::print("{:<7} {:>5.1f}B {:>5} {:>2} {:>5} {:>6.0f} {:>7.1f} {:>+7.1f} | {:>5.0f} {:>6.1f} {:>+6.1f} | {:>7.1f} {:>7.1f} "
               "{:>7.1f} {:>6.1f}\n",
               r.paper.scheme, r.paper.params_b, r.paper.gpus, r.paper.micro_batch, r.paper.global_batch,
               r.paper.tflops, r.sim.tflops_per_gpu, err, r.paper.days, r.days, derr, r.sim.iter_time_s,
               r.cfg.par.zero == 3 ? r.sim.zero3.compute_s : r.sim.pipeline_time_s,
               r.cfg.par.zero == 3 ? r.sim.zero3.comm_s : r.sim.dp_allreduce_s, r.sim.memory.peak / 1e9);
    EXPECT_LT(std::abs(err), 10.0) << r.paper.scheme << " " << r.paper.params_b << "B on " << r.paper.gpus;
    EXPECT_LT(std::abs(derr), 10.0) << r.paper.scheme << " " << r.paper.params_b << "B on " << r.paper.gpus
                                    << ": days for 300B tokens";
  }
  const double mape = sum_abs / rows.size();
  fmt::print("Table 2 mean absolute percentage error: {:.2f}%\n", mape);
  EXPECT_LE(mape, 5.0);
}

TEST(SimTable2, PtdpFasterThanZero3AtEveryGpuCount) {
  // Pairs as the paper compares them: the same model and GPU count (530B ZeRO-3's first row ran
  // on 640 GPUs, PTD-P's on 560).
  std::map<std::pair<double, int>, double> zero3, ptdp;
  for (const Row& r : simulate_table2()) {
    const int rank = r.paper.gpus == 640 ? 560 : r.paper.gpus;
    (r.paper.scheme == "ZeRO-3" ? zero3 : ptdp)[{r.paper.params_b, rank}] = r.sim.tflops_per_gpu;
  }
  ASSERT_EQ(zero3.size(), 6u);
  for (const auto& [key, z] : zero3) {
    ASSERT_TRUE(ptdp.count(key));
    EXPECT_GT(ptdp.at(key), z) << key.first << "B, " << key.second << " GPUs";
  }
}

TEST(SimTable2, Zero3LosesThroughputAsTheSamplesPerGpuShrink) {
  // The global batch is fixed: doubling the GPUs halves each one's compute while the parameter
  // gathers and gradient reduce-scatters per GPU stay the same, so less of them is hidden.
  std::map<double, std::vector<const Row*>> by_model;
  const auto rows = simulate_table2();
  for (const Row& r : rows)
    if (r.paper.scheme == "ZeRO-3") by_model[r.paper.params_b].push_back(&r);
  for (const auto& [params, rs] : by_model) {
    ASSERT_EQ(rs.size(), 3u);
    for (size_t i = 1; i < rs.size(); ++i) {
      const Zero3Timeline& a = rs[i - 1]->sim.zero3;
      const Zero3Timeline& b = rs[i]->sim.zero3;
      EXPECT_LT(rs[i]->sim.tflops_per_gpu, 0.75 * rs[i - 1]->sim.tflops_per_gpu) << params << "B";
      EXPECT_NEAR(b.gather_bytes / a.gather_bytes, 1.0, 0.02) << params << "B";
      EXPECT_LT(b.compute_s, 0.6 * a.compute_s) << params << "B";
      EXPECT_GT(b.exposed_comm_s / b.end_s, a.exposed_comm_s / a.end_s) << params << "B";
    }
  }
}

}  // namespace
}  // namespace ptdp::sim
