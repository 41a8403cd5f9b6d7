// The CUDA device query: on a machine without a GPU it reports zero devices with a reason.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"

namespace ptdp {
namespace {

TEST(CudaDevices, CountIsZeroWithAReasonOrNamesEveryDevice) {
  std::string reason;
  int n = cuda::device_count(&reason);
  if (n == 0) {
    EXPECT_FALSE(reason.empty());
    GTEST_SKIP() << "no GPU here: " << reason;
  }
  for (int d = 0; d < n; ++d) EXPECT_FALSE(cuda::device_name(d).empty());
}

}  // namespace
}  // namespace ptdp
#endif
