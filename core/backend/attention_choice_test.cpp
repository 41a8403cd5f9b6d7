// --attention-backend resolved per backend: auto is unfused on the CPU and on a CUDA backend without
// cuDNN (the virtual GPU), cudnn where cuDNN runs the run's own block; cudnn where it cannot run is
// refused naming the flag.
#include "core/backend/attention_choice.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/error.h"
#include "core/testing/host_device_backend.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp::attention_choice_test {
namespace {

void expect_cudnn_refused(const Backend& be, const std::string& reason) {
  try {
    resolve_attention_backend(be, AttentionBackend::Cudnn);
    FAIL() << "cudnn was accepted on the " << be.name() << " backend";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("--attention-backend cudnn: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << msg;
  }
}

TEST(AttentionChoice, TheCpuBackendRunsUnfusedByDefaultAndFlashOnRequest) {
  auto cpu = make_cpu_backend();
  EXPECT_EQ(resolve_attention_backend(*cpu, AttentionBackend::Auto), AttentionBackend::Unfused);
  EXPECT_FALSE(use_block_attention(*cpu, AttentionBackend::Auto));
  EXPECT_FALSE(use_block_attention(*cpu, AttentionBackend::Unfused));
  EXPECT_TRUE(use_block_attention(*cpu, AttentionBackend::Flash));
  EXPECT_TRUE(use_block_attention(*cpu, AttentionBackend::Auto, 4));
  expect_cudnn_refused(*cpu, "the cpu backend has no cuDNN");
  EXPECT_THROW(cpu->set_cudnn_attention(true), RuntimeError);
  EXPECT_FALSE(configure_attention(*cpu, AttentionBackend::Auto, 1, AttentionShape{}).blocks);
}

// The backward's calls: the GPU session's s = 2048 shapes in one (0.5 GB of dP workspace), a LLaMA-3
// 8B layer at s = 8192 (4.3 GB) in four of 2 groups (1 GiB each), one group a call at the least.
TEST(AttentionChoice, CudnnBackwardCallsKeepTheirWorkspaceWithinTheBound) {
  EXPECT_EQ(cudnn_dp_workspace_bytes(4, 16, 2048, 2048), 536870912);
  EXPECT_EQ(cudnn_dp_workspace_bytes(1, 1, 100, 65), 1 * 128 * 128 * 2);  // lengths rounded up to 64
  EXPECT_EQ(cudnn_backward_groups(4, 2048, 2048, 16, 16), 16);
  EXPECT_EQ(cudnn_backward_groups(2, 2048, 2048, 32, 8), 8);
  EXPECT_EQ(cudnn_backward_groups(1, 8192, 8192, 32, 8), 2);
  EXPECT_EQ(cudnn_dp_workspace_bytes(1, 8, 8192, 8192), kCudnnBackwardWorkspaceCap);
  EXPECT_EQ(cudnn_backward_groups(1, 8192, 8192, 32, 32), 8);
  EXPECT_EQ(cudnn_backward_groups(1, 8192, 8192, 24, 6), 2);   // 5 and 4 do not divide 6; 3 needs 1.6 GB
  EXPECT_EQ(cudnn_backward_groups(1, 65536, 65536, 4, 4), 1);  // one head alone is over: one group a call
  EXPECT_EQ(cudnn_backward_groups(2, 128, 128, 4, 4, 1), 1);
}

// A device whose cuDNN takes bf16 heads of 64 only: auto runs cuDNN where it takes the run's block,
// else the unfused attention (not ptdp's flash kernel, which would run every block cuDNN refuses),
// and says why; an explicit cudnn and context parallelism keep cuDNN for the blocks it takes.
TEST(AttentionChoice, AutoTakesCudnnOnlyWhereItRunsTheRunsOwnBlock) {
  std::vector<std::string> asked;
  auto be = testing::make_host_device_backend([&](int b, int s, int a, int g, int hd, DType dt) {
    asked.push_back(fmt::format("{} {} {} {} {} {}", b, s, a, g, hd, dtype_name(dt)));
    return dt == DType::BF16 && hd == 64 ? std::string() : std::string("no engine for this graph");
  });
  const AttentionShape taken{4, 2048, 16, 4, 64, DType::BF16};
  AttentionPlan plan = configure_attention(*be, AttentionBackend::Auto, 1, taken);
  EXPECT_EQ(plan.kernels, AttentionBackend::Cudnn);
  EXPECT_TRUE(plan.blocks);
  EXPECT_EQ(plan.note, "");
  EXPECT_EQ(asked, std::vector<std::string>{"4 2048 16 4 64 bf16"});

  AttentionShape f32 = taken;
  f32.dt = DType::F32;
  plan = configure_attention(*be, AttentionBackend::Auto, 1, f32);
  EXPECT_EQ(plan.kernels, AttentionBackend::Unfused);
  EXPECT_FALSE(plan.blocks);
  EXPECT_EQ(plan.note, "--attention-backend auto: no engine for this graph; the unfused attention runs");

  plan = configure_attention(*be, AttentionBackend::Cudnn, 1, f32);
  EXPECT_EQ(plan.kernels, AttentionBackend::Cudnn);
  EXPECT_TRUE(plan.blocks);
  EXPECT_EQ(plan.note, "");
  asked.clear();
  plan = configure_attention(*be, AttentionBackend::Auto, 2, f32);
  EXPECT_EQ(plan.kernels, AttentionBackend::Cudnn);
  EXPECT_TRUE(plan.blocks);
  EXPECT_TRUE(asked.empty()) << "the ring's blocks are not probed";
  for (AttentionBackend k : {AttentionBackend::Flash, AttentionBackend::Unfused}) {
    plan = configure_attention(*be, k, 1, taken);
    EXPECT_EQ(plan.kernels, k);
    EXPECT_EQ(plan.blocks, k == AttentionBackend::Flash);
  }
  EXPECT_TRUE(asked.empty()) << "only auto probes";
}

#ifdef PTDP_VGPU
TEST(CudaAttentionChoice, TheVirtualGpuRunsUnfusedByDefaultAndRefusesCudnn) {
  std::string reason;
  if (cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
  auto gpu = make_cuda_backend(0);
  EXPECT_EQ(resolve_attention_backend(*gpu, AttentionBackend::Auto), AttentionBackend::Unfused);
  EXPECT_FALSE(use_block_attention(*gpu, AttentionBackend::Auto));
  EXPECT_TRUE(use_block_attention(*gpu, AttentionBackend::Auto, 2));  // context parallelism: blocks
  EXPECT_TRUE(use_block_attention(*gpu, AttentionBackend::Flash));
  EXPECT_FALSE(use_block_attention(*gpu, AttentionBackend::Unfused));
  expect_cudnn_refused(*gpu, "the virtual GPU has no cuDNN");
  gpu->set_cudnn_attention(false);
  try {
    gpu->set_cudnn_attention(true);
    FAIL() << "the virtual GPU switched cuDNN attention on";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("the virtual GPU has no cuDNN"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace ptdp::attention_choice_test
