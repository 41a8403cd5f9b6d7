// Mixed precision on the CPU backend (bf16/f16 storage, f32 arithmetic, f32 gradients and
// master weights): the reference for the CUDA backend. bf16 follows f32 closely; f16 scales
// the loss dynamically, skipping steps whose gradients overflow and lowering the scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/parallel/topology.h"
#include "core/testing/parallel_run.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

TrainConfig tiny_train() { return testing::equivalence_train_config(2); }

// Norm-wise relative difference of two f32 buffers.
double rel_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Pass {
  double loss = 0;
  Tensor grads;
};

Pass forward_backward(DType dt) {
  const ModelConfig c = preset_config("tiny");
  auto be = make_cpu_backend();
  Gpt g(c, ShardSpec{}, *be, dt);
  g.init(7);
  SyntheticSamples data(c.vocab_size, c.seq_length, 7);
  const int b = 4;
  Tensor tok = Tensor::empty({int64_t(b) * c.seq_length}, DType::I32), tgt = tok.clone();
  load_microbatch(data, 0, b, tok, tgt);
  Pass p;
  auto cache = g.forward(b, tok, &tgt, Recompute::None, nullptr, &p.loss);
  g.backward(*cache, 1.0 / (double(b) * c.seq_length), nullptr, nullptr);
  p.loss /= double(b) * c.seq_length;
  p.grads = g.grads();
  return p;
}

TEST(MixedPrecision, Bf16AndF16GradientsOfTheWholeModelFollowF32) {
  const Pass ref = forward_backward(DType::F32);
  for (DType dt : {DType::BF16, DType::F16}) {
    const Pass got = forward_backward(dt);
    ASSERT_EQ(got.grads.dtype(), DType::F32) << "gradients accumulate in f32";
    EXPECT_NEAR(got.loss, ref.loss, 1e-2 * ref.loss) << dtype_name(dt);
    const double d = rel_diff(ref.grads.data<float>(), got.grads.data<float>(), ref.grads.numel());
    std::printf("%s: loss %.6f (f32 %.6f), gradients %.3g from f32 (norm-wise)\n", dtype_name(dt).data(), got.loss,
                ref.loss, d);
    EXPECT_LT(d, dt == DType::BF16 ? 3e-2 : 5e-3) << dtype_name(dt);
    EXPECT_GT(d, 0) << dtype_name(dt) << " is not rounding at all";
  }
}

TEST(MixedPrecision, Bf16TrainingFollowsF32) {
  const ModelConfig c = preset_config("tiny");
  const RunResult f32 = testing::train_parallel(c, tiny_train(), Layout{}, 10, 3);
  Layout bf;
  bf.dtype = DType::BF16;
  const RunResult b16 = testing::train_parallel(c, tiny_train(), bf, 10, 3);
  for (size_t i = 0; i < f32.losses.size(); ++i) EXPECT_NEAR(b16.losses[i], f32.losses[i], 1e-2 * f32.losses[i]) << i;
  EXPECT_LT(testing::compare_weights(f32, b16).whole, 1e-2);
}

// t=2, p=2 (without and with sequence parallelism) and t=1, p=2, d=2 (interleaved) in bf16
// against one bf16 rank: the same mathematics,
// rounded at different places (tensor-parallel partial sums), so close but not bitwise.
TEST(MixedPrecision, Bf16ParallelLayoutsMatchOneRank) {
  const ModelConfig c = preset_config("tiny");
  Layout one;
  one.dtype = DType::BF16;
  const RunResult ref = testing::train_parallel(c, tiny_train(), one, 3, 5);
  Layout tp;
  tp.tp = 2, tp.pp = 2, tp.dtype = DType::BF16;
  Layout il;
  il.pp = 2, il.dp = 2, il.vpp = 2, il.schedule = ScheduleKind::Interleaved, il.dtype = DType::BF16;
  Layout sp = tp;  // sequence parallelism: bf16 all-gathers and reduce-scatters
  sp.sequence_parallel = true;
  for (const Layout& l : {tp, il, sp}) {
    const RunResult got = testing::train_parallel(c, tiny_train(), l, 3, 5);
    for (size_t i = 0; i < ref.losses.size(); ++i) EXPECT_NEAR(got.losses[i], ref.losses[i], 5e-3 * ref.losses[i]) << l.name();
    EXPECT_LT(testing::compare_weights(ref, got).whole, 5e-3) << l.name();
  }
}

// f16 with sequence parallelism (t=2, p=2, a dynamic scale that fits): the f16 all-gathers,
// reduce-scatters and the LayerNorm gradients' all-reduce (f32, after the loss scale) give the
// losses and weights of the same layout without it, to f16 rounding.
TEST(MixedPrecision, F16SequenceParallelFollowsTheSameLayoutWithoutIt) {
  const ModelConfig c = preset_config("tiny");
  TrainConfig tc = tiny_train();
  tc.loss_scale.dynamic = true;
  tc.loss_scale.initial = 1024;
  Layout tp;
  tp.tp = 2, tp.pp = 2, tp.dtype = DType::F16;
  Layout sp = tp;
  sp.sequence_parallel = true;
  const RunResult ref = testing::train_parallel(c, tc, tp, 3, 5);
  const RunResult got = testing::train_parallel(c, tc, sp, 3, 5);
  for (size_t i = 0; i < ref.losses.size(); ++i) EXPECT_NEAR(got.losses[i], ref.losses[i], 2e-3 * ref.losses[i]) << i;
  EXPECT_LT(testing::compare_weights(ref, got).whole, 2e-3);
}

#ifdef PTDP_HAVE_CUDA
// The CUDA backend in bf16 and f16 (t=2, p=2, every rank a thread on GPU 0) against the CPU
// backend in the same precision: the same rounding points, sums in other orders.
TEST(MixedPrecision, CudaBf16AndF16FollowTheCpuBackend) {
  std::string why;
  if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU here: " << why;
  const ModelConfig c = preset_config("tiny");
  for (DType dt : {DType::BF16, DType::F16}) {
    Layout cpu;
    cpu.tp = 2, cpu.pp = 2, cpu.dtype = dt;
    Layout gpu = cpu;
    gpu.backend = "cuda";
    const RunResult ref = testing::train_parallel(c, tiny_train(), cpu, 3, 5);
    const RunResult got = testing::train_parallel(c, tiny_train(), gpu, 3, 5);
    for (size_t i = 0; i < ref.losses.size(); ++i)
      EXPECT_NEAR(got.losses[i], ref.losses[i], 5e-3 * ref.losses[i]) << gpu.name() << " iteration " << i + 1;
    EXPECT_LT(testing::compare_weights(ref, got).whole, 5e-3) << gpu.name();
  }
}
#endif

// Runs `iters` steps of tiny in f16 on one rank; `hook(iteration, model)` runs before each.
std::vector<IterStats> train_f16(const LossScaleConfig& ls, int iters,
                                 const std::function<void(int, Gpt&)>& hook = nullptr, bool skip_nonfinite = false) {
  const ModelConfig c = preset_config("tiny");
  auto be = make_cpu_backend();
  Gpt g(c, ShardSpec{}, *be, DType::F16);
  g.init(11);
  SyntheticSamples data(c.vocab_size, c.seq_length, 11);
  TrainConfig tc = tiny_train();
  tc.loss_scale = ls;
  tc.skip_nonfinite = skip_nonfinite;
  Trainer t(g, data, tc);
  std::vector<IterStats> out;
  for (int it = 1; it <= iters; ++it) {
    if (hook) hook(it, g);
    out.push_back(t.step());
  }
  return out;
}

TEST(MixedPrecision, F16OverflowSkipsStepsAndLowersTheScaleUntilItFits) {
  LossScaleConfig ls;
  ls.dynamic = true;
  ls.initial = 4294967296.0;  // 2^32, Megatron's default: the f16 gradients overflow at first
  const std::vector<IterStats> st = train_f16(ls, 30);
  ASSERT_TRUE(st[0].skipped);
  EXPECT_EQ(st[0].loss_scale, 4294967296.0);
  EXPECT_EQ(st[1].loss_scale, 4294967296.0);  // hysteresis 2: the second overflow halves it
  EXPECT_EQ(st[2].loss_scale, 2147483648.0);
  size_t first_update = 0;
  while (first_update < st.size() && st[first_update].skipped) ++first_update;
  ASSERT_LT(first_update, st.size()) << "the scale never came down far enough";
  for (size_t i = first_update; i < st.size(); ++i) {
    EXPECT_FALSE(st[i].skipped) << "iteration " << i + 1;
    EXPECT_TRUE(std::isfinite(st[i].grad_norm));
  }
  EXPECT_LT(st.back().loss, st[first_update].loss);  // it learns once the scale fits
}

TEST(MixedPrecision, F16TrainingWithAFittingScaleFollowsF32) {
  LossScaleConfig ls;
  ls.dynamic = true;
  ls.initial = 1024;
  const std::vector<IterStats> f16 = train_f16(ls, 10);
  const RunResult f32 = [] {
    TrainConfig tc = tiny_train();
    const ModelConfig c = preset_config("tiny");
    auto be = make_cpu_backend();
    Gpt g(c, ShardSpec{}, *be);
    g.init(11);
    SyntheticSamples data(c.vocab_size, c.seq_length, 11);
    Trainer t(g, data, tc);
    RunResult r;
    for (int i = 0; i < 10; ++i) r.losses.push_back(t.step().loss);
    return r;
  }();
  for (size_t i = 0; i < f16.size(); ++i) {
    EXPECT_FALSE(f16[i].skipped);
    EXPECT_NEAR(f16[i].loss, f32.losses[i], 2e-3 * f32.losses[i]) << i;
  }
}

// An injected NaN in f16 is an overflow like any other: the step is skipped and the scale
// lowered, and training goes on (it does not stop the run as in f32 and bf16).
TEST(MixedPrecision, F16InjectedNaNSkipsTheStepAndLowersTheScale) {
  LossScaleConfig ls;
  ls.dynamic = true;
  ls.initial = 1024;
  ls.hysteresis = 1;
  const std::vector<IterStats> st = train_f16(ls, 4, [](int it, Gpt& g) {
    if (it == 2) g.param("wpe").data<f16>()[0] = float_to_f16(NAN);
    if (it == 3) g.param("wpe").data<f16>()[0] = float_to_f16(0.0f);
  });
  EXPECT_FALSE(st[0].skipped);
  EXPECT_TRUE(st[1].skipped);
  EXPECT_EQ(st[1].loss_scale, 1024);
  EXPECT_EQ(st[2].loss_scale, 512);
  EXPECT_FALSE(st[2].skipped);
  EXPECT_FALSE(st[3].skipped);
  EXPECT_TRUE(std::isfinite(st[3].loss));
}

}  // namespace
}  // namespace ptdp
