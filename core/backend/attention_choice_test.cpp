// --attention-backend resolved per backend: auto is unfused on the CPU and flash on a CUDA backend
// without cuDNN (the virtual GPU); cudnn where it cannot run is refused naming the flag.
#include "core/backend/attention_choice.h"

#include <gtest/gtest.h>

#include "core/backend/backend.h"
#include "core/common/error.h"
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
  EXPECT_FALSE(configure_attention(*cpu, AttentionBackend::Auto));
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
