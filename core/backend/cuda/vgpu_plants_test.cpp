// Planted bugs in ptdp's own kernels that only the vgpu's per-access checks see (vgpu/README.md,
// "Kernel memory accesses"): each is reported with the kernel and the memory it reached.
#include <gtest/gtest.h>

#if defined(PTDP_HAVE_CUDA) && defined(PTDP_VGPU)
#include <vgpu/runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

std::string joined_messages(const std::vector<std::string>& m) {
  std::string s;
  for (const std::string& x : m) s += x + "\n";
  return s;
}

// A vocabulary-parallel embedding given the full vocabulary's row count instead of its shard's:
// a token of another rank's shard indexes past this shard's table, over its padding, into
// whatever tensor the caching allocator placed further on. That tensor is live and written, so
// bounds and initialisation pass; no argument of the kernel points into it.
TEST(CudaVgpuPlants, AnEmbeddingRowPastItsShardReadsAnotherTensorAndIsReported) {
  std::string reason;
  if (device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  cudaStream_t st;
  PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int64_t rows = 4;  // this shard's rows, one float each
  auto* wte = static_cast<float*>(al.allocate(rows * 4, st));
  auto* other = static_cast<float*>(al.allocate(4096, st));
  auto* x = static_cast<float*>(al.allocate(4, st));
  auto* tok = static_cast<int32_t*>(al.allocate(4, st));
  fill(wte, DType::F32, rows, 1.0, st);
  fill(other, DType::F32, 1024, 2.0, st);
  const int64_t jump = (other - wte) + 7;  // element 7 of the other tensor
  ASSERT_GT(jump, rows);
  ASSERT_LT(jump, int64_t(std::numeric_limits<int32_t>::max()));
  const int32_t id = int32_t(jump);
  PTDP_CUDA_CHECK(cudaMemcpyAsync(tok, &id, 4, cudaMemcpyHostToDevice, st));
  {
    vgpu::CaptureViolations capture;
    // planted: the full vocabulary's rows, not the shard's
    embedding_forward(x, tok, wte, /*wte_rows=*/int64_t(1) << 31, 0, nullptr, DType::F32, 1, 1, 1, st);
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    const auto m = capture.messages();
    const std::string all = joined_messages(m);
    EXPECT_NE(all.find("out of bounds: kernel embedding_forward_kernel<T>"), std::string::npos) << all;
    EXPECT_NE(all.find("accesses 4 byte(s) at byte offset 28 of allocation #"), std::string::npos) << all;
    EXPECT_NE(all.find("which none of the kernel's 3 pointer argument(s) points into"), std::string::npos) << all;
    EXPECT_NE(all.find("embed_xent.cu:"), std::string::npos) << all;
  }
  {  // the right row count: the token is another shard's, the row is zero, nothing is reported
    vgpu::CaptureViolations capture;
    embedding_forward(x, tok, wte, rows, 0, nullptr, DType::F32, 1, 1, 1, st);
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_TRUE(capture.messages().empty()) << joined_messages(capture.messages());
  }
  al.deallocate(wte, rows * 4);
  al.deallocate(other, 4096);
  al.deallocate(x, 4);
  al.deallocate(tok, 4);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
  al.forget_stream(st);
  PTDP_CUDA_CHECK(cudaStreamDestroy(st));
}

// Every __shared__ array of ptdp's kernels has a red zone after it (vgpu/include/vgpu/device.h),
// so an index past its end is reported instead of landing in the next array.
TEST(CudaVgpuPlants, EverySharedArrayOfPtdpsKernelsHasARedZoneAfterIt) {
  for (const std::string& name : vgpu::unguarded_shared_variables())
    EXPECT_EQ(name.find("ptdp::"), std::string::npos) << name << ": no red zone follows it";
}

}  // namespace
}  // namespace ptdp::cuda
#endif
