// The performance model against published runs it was not calibrated on (docs/SIMULATOR.md,
// "Other published runs"): Korthikanti et al. 2022 Tables 4 and 5 on the a100-selene profile with
// the 2022 code, and Megatron-Core's H100 weak scaling on h100-dgx with mcore. One profile per
// machine, the same for every experiment; what differs is only the software the source ran.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/results/csv_reader.h"
#include "core/sim/simulator.h"
#include "experiments/result_row.h"
#include "experiments/sweep.h"

namespace ptdp {
namespace {

struct Compared {
  double mape = 0, worst = 0;
  int points = 0, out_of_memory = 0;
};

// (series, x) -> the published value, from results/paper/NAME.csv.
std::map<std::pair<std::string, std::string>, double> published(const SweepSpec& spec) {
  std::map<std::pair<std::string, std::string>, double> paper;
  const CsvTable t = CsvTable::read(std::string(PTDP_SOURCE_DIR) + "/results/paper/" + spec.paper + ".csv",
                                    {"figure", "series", "x", "value"});
  for (size_t i = 0; i < t.size(); ++i) paper[{t.text(i, "series"), t.text(i, "x")}] = t.number(i, "value");
  return paper;
}

// Simulates every point of spec `name` on its profile and compares `metric` of each series with
// results/paper/NAME.csv, printing paper, ours and error per point.
Compared compare(const std::string& name) {
  const SweepSpec spec = load_sweep_spec(name);
  const sim::HardwareProfile hw = sim::load_profile(spec.hardware);
  const auto paper = published(spec);
  std::map<std::string, std::string> metric;
  for (const auto& s : spec.series) metric[s.name] = s.metric;
  Compared c;
  for (const SweepPoint& p : expand_sweep(spec, SweepScale::Paper)) {
    const sim::SimResult r = sim::simulate(p.cfg, hw);
    if (!r.memory.fits) ++c.out_of_memory;
    // The value `ptdp reproduce` compares: the metric's column of the row it writes.
    const std::string& m = metric[p.series];
    const double ours = std::stod(make_simulated_row(p.cfg, hw, r).get(metric_column(m))) * metric_scale(m);
    const double want = paper.at({p.series, p.x});
    const double err = 100 * (ours - want) / want;
    std::printf("%-14s %-22s %-24s paper %8.4g  ours %8.4g  %+6.1f%%%s\n", name.c_str(), p.series.c_str(),
                p.x.c_str(), want, ours, err, r.memory.fits ? "" : "  OUT OF MEMORY");
    c.mape += std::abs(err);
    c.worst = std::max(c.worst, std::abs(err));
    ++c.points;
  }
  c.mape /= c.points;
  std::printf("%s: MAPE %.2f%%, largest %.2f%%, %d points\n", name.c_str(), c.mape, c.worst, c.points);
  return c;
}

TEST(PublishedRuns, Korthikanti2022Table5IterationTimes) {
  const Compared c = compare("kor22-table5");
  EXPECT_EQ(c.points, 10);
  EXPECT_EQ(c.out_of_memory, 0);
  EXPECT_LE(c.mape, 3.0);
  EXPECT_LE(c.worst, 6.0);
}

// What data parallelism adds to the 530B run: 2240 GPUs (d = 8, the abstract's MFU) against
// Table 5's 280 (d = 1), about 1.3 s in both series. The model's increment is the fp32 gradient
// all-reduce of stage 0 (1.9B parameters over 8 nodes, one NIC a GPU) after the pipeline's
// flush: about half of it (docs/SIMULATOR.md, "Other published runs"). Asserted: what the
// model has, and that it stays below the measurement until the rest is understood.
TEST(PublishedRuns, Korthikanti2022DataParallelIncrementOf530B) {
  const SweepSpec spec = load_sweep_spec("kor22-table5");
  const sim::HardwareProfile hw = sim::load_profile(spec.hardware);
  const auto paper = published(spec);
  std::map<std::pair<std::string, std::string>, double> ours;
  for (const SweepPoint& p : expand_sweep(spec, SweepScale::Paper))
    if (p.x.rfind("530B", 0) == 0) ours[{p.series, p.x}] = sim::simulate(p.cfg, hw).iter_time_s;
  for (const auto& s : spec.series) {
    const std::pair<std::string, std::string> d1{s.name, "530B"}, d8{s.name, "530B, 2240 GPUs"};
    const double measured = paper.at(d8) - paper.at(d1), model = ours.at(d8) - ours.at(d1);
    std::printf("kor22-table5   %-22s d = 1 -> 8 adds   paper %6.2f s  ours %6.2f s  %+6.1f%%\n", s.name.c_str(),
                measured, model, 100 * (model - measured) / measured);
    EXPECT_GT(model, 0.4 * measured) << s.name;
    EXPECT_LT(model, 1.3 * measured) << s.name;
  }
}

// Issue 28's bound for Korthikanti et al.'s tables: a mean absolute error of at most 3%.
TEST(PublishedRuns, Korthikanti2022Table4LayerTimes) {
  const Compared c = compare("kor22-table4");
  EXPECT_EQ(c.points, 10);
  EXPECT_LE(c.mape, 3.0);
  EXPECT_LE(c.worst, 5.0);
}

TEST(PublishedRuns, MegatronCoreH100WeakScaling) {
  const Compared c = compare("mcore-h100");
  EXPECT_EQ(c.points, 9);
  EXPECT_EQ(c.out_of_memory, 0) << "every row of the table ran";
  EXPECT_LE(c.mape, 8.0);
}

// BLOOM-176B's layouts on Jean Zay with Megatron-DeepSpeed (a100-jeanzay, --stack
// megatron-deepspeed): a stack and a machine built from their sources, neither set from this
// table. The model is too fast at every point (docs/SIMULATOR.md, "DeepSpeed's pipeline engine").
TEST(PublishedRuns, BloomOnJeanZayWithDeepSpeedsPipelineEngine) {
  const Compared c = compare("bloom-176b");
  EXPECT_EQ(c.points, 5);
  EXPECT_EQ(c.out_of_memory, 0) << "every row of the table ran";
  EXPECT_LE(c.mape, 10.0);
  EXPECT_LE(c.worst, 20.0);
}

// DeepSpeed's engine against Megatron's code of the same year on BLOOM's layout: its blocking
// transfers, extra gathers, fp32 gradient buffer and all-reduced ZeRO-1 cost it about a tenth.
TEST(PublishedRuns, DeepSpeedsEngineIsSlowerThanMegatronsOnBloomsLayout) {
  const SweepSpec spec = load_sweep_spec("bloom-176b");
  const sim::HardwareProfile hw = sim::load_profile(spec.hardware);
  for (const SweepPoint& p : expand_sweep(spec, SweepScale::Paper)) {
    RunConfig megatron = p.cfg;
    megatron.stack = StackKind::Megatron2021;
    const double ratio = sim::simulate(p.cfg, hw).iter_time_s / sim::simulate(megatron, hw).iter_time_s;
    EXPECT_GT(ratio, 1.03) << p.x;
    EXPECT_LT(ratio, 1.25) << p.x;
  }
}

// The same per-pipeline work ran 8-10% faster in 2022 than in 2021 (Korthikanti et al.'s full
// recomputation rows against the SC'21 paper's 530B and 1T): the 2021 code on the 2022 runs is slower
// by about that much, and only because of the code.
TEST(PublishedRuns, TheSameRunsWithThe2021CodeAreSlower) {
  const SweepSpec spec = load_sweep_spec("kor22-table5");
  const sim::HardwareProfile hw = sim::load_profile(spec.hardware);
  for (const SweepPoint& p : expand_sweep(spec, SweepScale::Paper)) {
    if (p.series != "Full recompute") continue;
    RunConfig old = p.cfg;
    old.stack = StackKind::Megatron2021;
    const double ratio = sim::simulate(old, hw).iter_time_s / sim::simulate(p.cfg, hw).iter_time_s;
    EXPECT_GT(ratio, 1.04) << p.x;
    EXPECT_LT(ratio, 1.15) << p.x;
  }
}

}  // namespace
}  // namespace ptdp
