// NcclNode: two GPUs driven by one thread (the virtual GPUs of the vgpu build, or a machine's);
// skipped without two GPUs in the real build. No time is asserted, only that one is measured.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_NCCL
#include <string>
#include <vector>

#include "core/backend/cuda/device_info.h"
#include "core/comm/nccl/nccl_node.h"

namespace ptdp {
namespace {

#define PTDP_NODE_NEEDS_GPUS(n)                                                                   \
  do {                                                                                            \
    std::string why_;                                                                             \
    if (cuda::device_count(&why_) < (n)) GTEST_SKIP() << "the test needs " << (n) << " GPU(s) " << why_; \
  } while (0)

TEST(NcclNode, AGroupedAllReduceIsTimedOnEveryGpuAndSumsThere) {
  PTDP_NODE_NEEDS_GPUS(2);
  NcclNode node({0, 1});
  ASSERT_EQ(node.size(), 2);
  std::vector<Tensor> x;
  for (int i = 0; i < 2; ++i) {
    x.push_back(node.backend(i).empty({1000}, DType::F32));
    node.backend(i).fill(x.back(), double(i + 1));
  }
  const double seconds = node.seconds("all-reduce", [&] {
    node.group([&](int i) {
      PTDP_NCCL_OK(ncclAllReduce(x[i].raw(), x[i].raw(), 1000, ncclFloat32, ncclSum, node.comm(i), node.stream(i)));
    });
  });
  EXPECT_GE(seconds, 0.0);
  for (int i = 0; i < 2; ++i) {
    const Tensor host = to_host(node.backend(i), x[i]);
    int64_t wrong = 0;
    for (int64_t e = 0; e < host.numel(); ++e) wrong += host.data<float>()[e] != 3.0f;
    EXPECT_EQ(wrong, 0) << "GPU " << i;
  }
  x.clear();
  node.release_cached();
  EXPECT_EQ(node.broken(), "");
}

TEST(NcclNode, AnErrorInItsWorkAbortsTheNodeAndLaterWorkIsRefusedWithTheReason) {
  PTDP_NODE_NEEDS_GPUS(2);
  NcclNode node({0, 1});
  EXPECT_THROW(node.seconds("planted", [] { throw RuntimeError("a planted failure"); }), RuntimeError);
  EXPECT_NE(node.broken().find("a planted failure"), std::string::npos) << node.broken();
  try {
    node.seconds("next", [] {});
    ADD_FAILURE() << "an aborted node took more work";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL node unusable"), std::string::npos) << e.what();
  }
}

TEST(NcclNode, AFailedNcclCallIsNamed) {
  PTDP_NODE_NEEDS_GPUS(1);
  try {
    PTDP_NCCL_OK(ncclGetVersion(nullptr));
    ADD_FAILURE() << "ncclGetVersion(nullptr) succeeded";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("ncclGetVersion(nullptr) failed: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptdp
#endif
