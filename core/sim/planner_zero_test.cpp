// The planner with sharded data parallelism allowed (--zero-modes): ZeRO-3 layouts are t = p = 1,
// the distributed optimizer lets more layouts fit, and for GPT-3 the model-parallel layouts still
// win (the paper's Table 2 conclusion).
#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/model/config.h"
#include "core/sim/planner.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

PlanRequest gpt3(int gpus, int B, std::vector<int> zero_modes) {
  PlanRequest r;
  r.model = preset_config("gpt3-175b");
  r.gpus = gpus;
  r.global_batch = B;
  r.top = 3;
  r.micro_batches = {1, 2, 4};
  r.max_vpp = 4;
  r.zero_modes = std::move(zero_modes);
  return r;
}

TEST(SimPlannerZero, ZeroThreeLayoutsHaveNoModelParallelismAndLoseToPtdpForGpt3) {
  const PlanResult only3 = plan(gpt3(384, 1536, {3}), selene());
  ASSERT_FALSE(only3.best.empty());
  for (const PlanEntry& e : only3.best) {
    EXPECT_EQ(e.cfg.par.zero, 3);
    EXPECT_EQ(e.cfg.par.tp, 1);
    EXPECT_EQ(e.cfg.par.pp, 1);
    EXPECT_EQ(e.cfg.par.dp, 384);
  }
  const PlanResult both = plan(gpt3(384, 1536, {0, 3}), selene());
  ASSERT_FALSE(both.best.empty());
  EXPECT_EQ(both.best.front().cfg.par.zero, 0);
  EXPECT_GT(both.best.front().result.tflops_per_gpu, only3.best.front().result.tflops_per_gpu);
  EXPECT_GT(both.layouts, only3.layouts);
}

TEST(SimPlannerZero, TheDistributedOptimizerLetsMoreLayoutsFit) {
  const PlanResult plain = plan(gpt3(384, 1536, {0}), selene());
  const PlanResult zero1 = plan(gpt3(384, 1536, {0, 1}), selene());
  EXPECT_GT(zero1.fit, 2 * plain.fit);
  ASSERT_FALSE(zero1.best.empty());
  EXPECT_GE(zero1.best.front().result.tflops_per_gpu, plain.best.front().result.tflops_per_gpu);
}

TEST(SimPlannerZero, RefusesUnknownModes) {
  EXPECT_THROW(plan(gpt3(384, 1536, {2}), selene()), UsageError);
  EXPECT_THROW(plan(gpt3(384, 1536, {}), selene()), UsageError);
}

}  // namespace
}  // namespace ptdp::sim
