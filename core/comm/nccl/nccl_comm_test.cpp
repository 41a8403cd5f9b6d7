// The NCCL communicator on a one-rank world (a lent GPU at least): skipped without a GPU.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_NCCL
#include <cuda_runtime.h>

#include "core/backend/cuda/device_info.h"
#include "core/comm/local/local_comm.h"
#include "core/comm/nccl/nccl_comm.h"

namespace ptdp {
namespace {

TEST(NcclComm, OneRankWorldReducesGathersAndSplits) {
  std::string reason;
  if (cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
  run_local_ranks(1, [](int, Communicator& boot) {
    auto comm = make_nccl_world(boot, 0);
    ASSERT_EQ(comm->size(), 1);
    float host[5] = {1, 2, 3, 4, 5};
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, sizeof host), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    Tensor x = Tensor::wrap(dev, {5}, DType::F32, Device::CUDA);
    comm->all_reduce(x, ReduceOp::Sum);
    Tensor y = Tensor::wrap(static_cast<float*>(dev), {5}, DType::F32, Device::CUDA);
    comm->all_gather(x, y);
    auto sub = comm->split(0, 0);
    sub->all_reduce(x, ReduceOp::Max);
    float back[5];
    ASSERT_EQ(cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], host[i]);
    cudaFree(dev);
  });
}

}  // namespace
}  // namespace ptdp
#endif
