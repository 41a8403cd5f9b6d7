// bf16 training with Megatron-core's precision knobs: gradients reduced in bf16
// (--grad-reduce-in-bf16) and Adam's moments kept in bf16 (--use-precision-aware-optimizer
// --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16). Each rounds, so one rank is no longer the exact
// reference; what holds instead: with d = 1 the reduction changes nothing, the plain and the
// sharded optimizer see the same bf16 sum, and the runs stay close to the f32-state ones.
#include <gtest/gtest.h>

#include "core/testing/equivalence.h"
#include "core/testing/parallel_run.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

TrainConfig bf16_reduction_train_cfg(bool bf16_reduction) {
  TrainConfig tc = testing::equivalence_train_config(2);
  tc.grad_reduce_bf16 = bf16_reduction;
  return tc;
}

Layout bf16_reduction_layout(int t, int p, int d, int zero) {
  Layout l;
  l.tp = t, l.pp = p, l.dp = d, l.zero = zero, l.dtype = DType::BF16;
  return l;
}

TEST(GradReduceBf16, ChangesARunOnlyWhereTheDataParallelGroupSums) {
  const ModelConfig c = preset_config("tiny");
  // d = 2: another sum, close to the f32 one.
  const RunResult f32_sum = testing::train_parallel(c, bf16_reduction_train_cfg(false), bf16_reduction_layout(1, 1, 2, 0), 3, 5);
  const RunResult bf16_sum = testing::train_parallel(c, bf16_reduction_train_cfg(true), bf16_reduction_layout(1, 1, 2, 0), 3, 5);
  const double d2 = testing::compare_weights(f32_sum, bf16_sum).whole;
  EXPECT_GT(d2, 0) << "the bf16 reduction rounds nothing";
  EXPECT_LT(d2, 1e-2);
  // d = 1 (t = 2, p = 2): nothing is summed over data-parallel ranks, nothing changes.
  const RunResult one = testing::train_parallel(c, bf16_reduction_train_cfg(false), bf16_reduction_layout(2, 2, 1, 0), 3, 5);
  const RunResult one_flag = testing::train_parallel(c, bf16_reduction_train_cfg(true), bf16_reduction_layout(2, 2, 1, 0), 3, 5);
  EXPECT_EQ(testing::compare_weights(one, one_flag).whole, 0);
  // The distributed optimizer (reduce-scatter) sees the same bf16 sums as the all-reduce.
  const RunResult sharded = testing::train_parallel(c, bf16_reduction_train_cfg(true), bf16_reduction_layout(1, 1, 2, 1), 3, 5);
  testing::expect_same_training(bf16_sum, sharded, "--zero 1 against --zero 0, both reduced in bf16");
}

TEST(PrecisionAwareOptimizer, Bf16MomentsFollowF32MomentsOnTheDistributedOptimizer) {
  const ModelConfig c = preset_config("tiny");
  const RunResult f32_state = testing::train_parallel(c, bf16_reduction_train_cfg(false), bf16_reduction_layout(1, 2, 2, 1), 4, 5);
  TrainConfig tc = bf16_reduction_train_cfg(false);
  tc.optimizer.precision_aware = true;
  tc.optimizer.exp_avg_dtype = tc.optimizer.exp_avg_sq_dtype = DType::BF16;
  const RunResult bf16_state = testing::train_parallel(c, tc, bf16_reduction_layout(1, 2, 2, 1), 4, 5);
  const double diff = testing::compare_weights(f32_state, bf16_state).whole;
  EXPECT_GT(diff, 0) << "the moments are not rounded";
  EXPECT_LT(diff, 1e-2);
  for (size_t i = 0; i < f32_state.losses.size(); ++i)
    EXPECT_NEAR(bf16_state.losses[i], f32_state.losses[i], 1e-2 * f32_state.losses[i]) << i;
}

#ifdef PTDP_HAVE_CUDA
// The CUDA backend with NCCL (d = 2, the distributed optimizer, bf16 reduction and bf16 moments)
// against the CPU backend on local ranks: the same rounding points; NCCL's ring rounds the bf16
// sum after each step where the local communicator rounds once, so close, not bitwise.
TEST(GradReduceBf16, CudaWithNcclFollowsTheCpuReference) {
  std::string why;
  const int gpus = cuda::device_count(&why);
  if (gpus == 0) GTEST_SKIP() << "no GPU here: " << why;
  if (!testing::nccl_ranks_fit(2, gpus, &why)) GTEST_SKIP() << why;
  const ModelConfig c = preset_config("tiny");
  TrainConfig tc = bf16_reduction_train_cfg(true);
  tc.optimizer.precision_aware = true;
  tc.optimizer.exp_avg_dtype = tc.optimizer.exp_avg_sq_dtype = DType::BF16;
  const Layout cpu = bf16_reduction_layout(1, 1, 2, 1);
  Layout gpu = cpu;
  gpu.backend = "cuda";
  gpu.comm = "nccl";
  const RunResult ref = testing::train_parallel(c, tc, cpu, 3, 5);
  const RunResult got = testing::train_parallel(c, tc, gpu, 3, 5);
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(got.losses[i], ref.losses[i], 5e-3 * ref.losses[i]) << gpu.name() << " iteration " << i + 1;
  EXPECT_LT(testing::compare_weights(ref, got).whole, 5e-3) << gpu.name();
}
#endif

}  // namespace
}  // namespace ptdp
