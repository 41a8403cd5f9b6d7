// cuDNN's fused attention (--attention-backend cudnn) against ptdp's flash kernel on the same GPU,
// bf16 and f16: forward y and lse, backward dq, dk and dv (accumulated into what they held), for a
// GPT block, grouped-query heads, a block without the mask, a causal block wholly in the queries'
// past and one on the diagonal at a position offset; blocks cuDNN is not asked for (causal off the
// diagonal) run ptdp's kernel bit for bit; two backward runs give the same bits. Without cuDNN these
// skip with the reason, or fail when PTDP_REQUIRE_CUDNN=1 (the GPU session's). CudaCudnnGraphs needs
// no GPU: the front end's checks of the graphs for Hopper. The virtual GPU has no cuDNN: there these
// tests are not built, and CudaAttentionChoice checks the refusal.
#include <gtest/gtest.h>

#if defined(PTDP_HAVE_CUDA) && !defined(PTDP_VGPU)
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend/attention_choice.h"
#include "core/backend/cuda/cudnn_attention.h"
#include "core/backend/cuda/testing/block_case.h"
#include "core/backend/cuda/testing/cudnn_session_blocks.h"
#include "core/backend/cuda/testing/op_fixture.h"
#include "core/common/error.h"
#include "core/testing/scoped_env.h"

namespace ptdp::cudnn_attention_test {
namespace {

using Case = testing::BlockCase;
using testing::describe;

// The blocks cuDNN is asked for: GPT's (one sequence's causal block), GQA with a ragged length, a
// block without the mask (sq != sk), one wholly in the queries' past (causal, every key visible)
// and a diagonal block of a context-parallel ring (q_pos = k_pos > 0).
const Case kCudnn[] = {
    {2, 128, 128, 4, 4, 64, 0, 0, true},  {1, 200, 200, 8, 2, 128, 0, 0, true}, {2, 64, 96, 4, 2, 64, 0, 0, false},
    {1, 64, 64, 4, 4, 64, 128, 0, true},  {1, 96, 96, 4, 4, 128, 96, 96, true},
};

bool cudnn_required() {
  const char* e = std::getenv("PTDP_REQUIRE_CUDNN");
  return e && std::strcmp(e, "1") == 0;
}

class CudnnAttention : public testing::CudaOpTest {
 protected:
  CudnnAttention() : CudaOpTest(777) {}
  void SetUp() override {
    CudaOpTest::SetUp();
    if (IsSkipped()) return;
    const std::string why = gpu->cudnn_attention_unavailable();
    if (!why.empty()) {
      if (cudnn_required()) FAIL() << "PTDP_REQUIRE_CUDNN=1 but " << why;
      GTEST_SKIP() << why;
    }
  }

  struct Result {
    Tensor y, lse, dq, dk, dv;
  };
  // Forward, then backward into dq, dk, dv that start at seeded values, with cuDNN on or off;
  // accumulating into them or (accumulate false) overwriting them.
  Result run(const Case& c, bool cudnn, bool accumulate = true) {
    gpu->set_cudnn_attention(cudnn);
    const int64_t nq = int64_t(c.b) * c.sq, nk = int64_t(c.b) * c.sk, lq = int64_t(c.a) * c.hd,
                  lk = int64_t(c.g) * c.hd;
    Tensor q = up(input({nq, lq}, 1, -2, 2)), k = up(input({nk, lk}, 2, -2, 2)), v = up(input({nk, lk}, 3));
    Tensor dy = up(input({nq, lq}, 4));
    Result r;
    r.y = poisoned({nq, lq}, dt);
    r.lse = poisoned({c.b, c.a, c.sq}, DType::F32);
    gpu->flash_attention_forward(r.y, r.lse, q, k, v, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal);
    r.dq = up(input({nq, lq}, 5));
    r.dk = up(input({nk, lk}, 6));
    r.dv = up(input({nk, lk}, 7));
    gpu->flash_attention_backward(r.dq, r.dk, r.dv, dy, q, k, v, r.y, r.lse, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos,
                                  c.k_pos, c.causal, accumulate);
    gpu->set_cudnn_attention(false);
    return r;
  }

  void expect_close(const Tensor& got, const Tensor& ref, const std::string& what, double tolerance) {
    const testing::Closeness c = testing::closeness(down(got), down(ref), /*strict_nonfinite=*/true);
    EXPECT_EQ(c.bad, 0) << what << ": non-finite values differ, the first at " << c.first_bad;
    EXPECT_LE(c.rel, tolerance) << what << " (" << dtype_name(dt) << "): relative error " << c.rel;
  }
  static bool same_bits(const Tensor& a, const Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
  }
  Tensor host(const Tensor& dev) {
    Tensor h = Tensor::empty(dev.shape(), dev.dtype());
    gpu->copy(h, dev);
    return h;
  }
};

TEST_P(CudnnAttention, TakesEveryBlockItIsAskedFor) {
  cuda::CudnnAttention att(cuda_stream(*gpu));
  for (const Case& c : kCudnn) {
    const auto blk = cuda::cudnn_block_of(c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal, dt);
    ASSERT_TRUE(blk.has_value()) << describe(c) << " is not one cuDNN is asked for";
    EXPECT_TRUE(att.takes(*blk)) << describe(c);
  }
  for (const std::string& r : att.refused()) ADD_FAILURE() << "refused: " << r;
}

TEST_P(CudnnAttention, MatchesPtdpsFlashKernel) {
  for (const Case& c : kCudnn) {
    const std::string what = describe(c);
    const Result ref = run(c, false), got = run(c, true);
    expect_close(got.y, ref.y, "y, " + what, tol);
    expect_close(got.lse, ref.lse, "lse, " + what, 1e-4);
    expect_close(got.dq, ref.dq, "dq, " + what, 2 * tol);
    expect_close(got.dk, ref.dk, "dk, " + what, 2 * tol);
    expect_close(got.dv, ref.dv, "dv, " + what, 2 * tol);
  }
}

// A block alone (accumulate false, the path of every layer without context parallelism): cuDNN
// writes dq, dk and dv over the seeded values, as ptdp's kernel does after zeroing them.
TEST_P(CudnnAttention, OverwritesTheGradientsOfABlockAlone) {
  for (const Case& c : kCudnn) {
    const std::string what = describe(c);
    const Result ref = run(c, false, false), got = run(c, true, false);
    expect_close(got.dq, ref.dq, "dq, " + what, 2 * tol);
    expect_close(got.dk, ref.dk, "dk, " + what, 2 * tol);
    expect_close(got.dv, ref.dv, "dv, " + what, 2 * tol);
  }
}

TEST_P(CudnnAttention, BlocksOffTheDiagonalRunPtdpsKernel) {
  const Case c{1, 64, 64, 4, 2, 64, 16, 0, true};  // causal, partly masked, not on the diagonal
  const Result ref = run(c, false), got = run(c, true);
  for (auto [a, b, name] : {std::tuple{&got.y, &ref.y, "y"}, std::tuple{&got.lse, &ref.lse, "lse"},
                            std::tuple{&got.dq, &ref.dq, "dq"}, std::tuple{&got.dk, &ref.dk, "dk"},
                            std::tuple{&got.dv, &ref.dv, "dv"}})
    EXPECT_TRUE(same_bits(host(*a), host(*b))) << name << " differs from ptdp's kernel";
}

TEST_P(CudnnAttention, BackwardIsDeterministic) {
  const Case c = kCudnn[1];
  const Result one = run(c, true), two = run(c, true);
  for (auto [a, b, name] : {std::tuple{&one.dq, &two.dq, "dq"}, std::tuple{&one.dk, &two.dk, "dk"},
                            std::tuple{&one.dv, &two.dv, "dv"}})
    EXPECT_TRUE(same_bits(host(*a), host(*b))) << name << " differs between two runs";
}

// A backward whose dP workspace exceeds the bound runs one call per run of key/value groups that
// fits it (here one group a call): the gradients are those of one call.
TEST_P(CudnnAttention, BackwardOverRunsOfGroupsMatchesOneCall) {
  for (const Case& c : {kCudnn[0], kCudnn[1]}) {
    const std::string what = describe(c);
    const auto blk = cuda::cudnn_block_of(c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal, dt);
    ASSERT_TRUE(blk.has_value()) << what;
    const Result one = run(c, true, false);
    Result split;
    int64_t split_ws = 0;
    {
      testing::ScopedEnv bound("PTDP_CUDNN_BACKWARD_WORKSPACE", "1");
      gpu->set_cudnn_attention(false);  // the next run's CudnnAttention reads the bound
      split = run(c, true, false);
      cuda::CudnnAttention att(cuda_stream(*gpu));
      EXPECT_EQ(att.backward_calls(*blk), c.g) << what;
      split_ws = att.backward_workspace(*blk);
    }
    gpu->set_cudnn_attention(false);
    cuda::CudnnAttention whole(cuda_stream(*gpu));
    EXPECT_EQ(whole.backward_calls(*blk), 1) << what;
    EXPECT_LE(split_ws, whole.backward_workspace(*blk)) << what;
    expect_close(split.dq, one.dq, "dq, " + what, 2 * tol);
    expect_close(split.dk, one.dk, "dk, " + what, 2 * tol);
    expect_close(split.dv, one.dv, "dv, " + what, 2 * tol);
  }
  testing::ScopedEnv bad("PTDP_CUDNN_BACKWARD_WORKSPACE", "1GB");
  try {
    cuda::CudnnAttention att(cuda_stream(*gpu));
    ADD_FAILURE() << "PTDP_CUDNN_BACKWARD_WORKSPACE=1GB was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("PTDP_CUDNN_BACKWARD_WORKSPACE='1GB' must be a positive number of bytes"),
              std::string::npos)
        << e.what();
  }
}

// auto (configure_attention) takes cuDNN for a block it builds, and passes it over for an f32 run,
// whose blocks cuDNN is not asked for, naming why: the unfused attention runs, not ptdp's kernel.
TEST_P(CudnnAttention, AutoTakesItForTheRunsBlockAndNotForF32) {
  const AttentionShape gpt{2, 128, 4, 4, 64, dt};
  EXPECT_EQ(gpu->cudnn_attention_refusal(gpt.b, gpt.s, gpt.a, gpt.g, gpt.hd, gpt.dt), "");
  AttentionPlan plan = configure_attention(*gpu, AttentionBackend::Auto, 1, gpt);
  EXPECT_EQ(plan.kernels, AttentionBackend::Cudnn);
  EXPECT_TRUE(plan.blocks);
  EXPECT_EQ(plan.note, "");
  AttentionShape f32 = gpt;
  f32.dt = DType::F32;
  plan = configure_attention(*gpu, AttentionBackend::Auto, 1, f32);
  EXPECT_EQ(plan.kernels, AttentionBackend::Unfused);
  EXPECT_FALSE(plan.blocks);
  EXPECT_NE(plan.note.find("is not a block cuDNN is asked for"), std::string::npos) << plan.note;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudnnAttention, ::testing::Values(DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// The blocks the GPU session's attention stages run pass the front end's checks for an H100/H200, on
// a machine without a GPU (scripts/test.sh runs the same checks: ptdp_cudnn_check).
TEST(CudaCudnnGraphs, TheSessionsShapesPassTheFrontEndsChecksForHopper) {
  const std::string why = cuda::cudnn_unavailable();
  if (!why.empty()) {
    if (cudnn_required()) FAIL() << "PTDP_REQUIRE_CUDNN=1 but " << why;
    GTEST_SKIP() << why;
  }
  for (DType dt : {DType::BF16, DType::F16})
    for (const cuda::CudnnBlock& blk : testing::cudnn_session_blocks(dt))
      EXPECT_EQ(cuda::cudnn_validate(blk, 90), "") << blk.b << "x" << blk.sq << " heads " << blk.a << "/" << blk.g;
  // and the checks are real: a head of 12 (not a multiple of 8) is refused
  EXPECT_NE(cuda::cudnn_validate(cuda::CudnnBlock{1, 64, 64, 4, 4, 12, true, DType::BF16}, 90), "");
}

}  // namespace
}  // namespace ptdp::cudnn_attention_test
#endif  // PTDP_HAVE_CUDA && !PTDP_VGPU
