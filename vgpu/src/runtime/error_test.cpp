// Errors: the per-thread last error, sticky errors that corrupt a device for good, and names
// and strings for every code.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "runtime/test_util.h"

namespace {

TEST(RuntimeError, LastErrorIsPerThreadPeekKeepsGetClears) {
  cudaGetLastError();
  EXPECT_EQ(cudaSetDevice(1000), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  int dev = -1;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);  // success does not reset it
  EXPECT_EQ(dev, 0);
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaGetLastError(); }).join();
  EXPECT_EQ(other, cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(RuntimeError, CurrentDeviceIsPerThread) {
  vgpu_test::AtLeastDevices devices(8);
  ASSERT_EQ(cudaSetDevice(5), cudaSuccess);
  int seen = -1;
  std::thread([&] { cudaGetDevice(&seen); }).join();
  EXPECT_EQ(seen, 0);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// Device 7 is corrupted until reset_device_for_testing (a real process must exit to recover).
struct OnDevice7 {
  vgpu_test::AtLeastDevices devices{8};
  OnDevice7() { cudaSetDevice(7); }
  ~OnDevice7() {
    vgpu::reset_device_for_testing(7);
    cudaSetDevice(0);
    cudaGetLastError();
  }
};

TEST(RuntimeError, IllegalAddressIsStickyForTheDevice) {
  OnDevice7 on7;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* d;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  vgpu::enqueue(s, vgpu::capture_site("faulting kernel"), {}, [] { return cudaErrorIllegalAddress; });
  int after = 0;
  vgpu::enqueue(s, vgpu::capture_site("later kernel"), {}, [&after] {
    after = 1;
    return cudaSuccess;
  });
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
  EXPECT_EQ(after, 0);  // a corrupted context runs nothing more
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // cannot be cleared
  void* d2;
  EXPECT_EQ(cudaMalloc(&d2, 64), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemset(d, 0, 64), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  cudaEvent_t e;
  EXPECT_EQ(cudaEventCreate(&e), cudaErrorIllegalAddress);
  // Other devices are unaffected.
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // this thread's last error from before
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* d3;
  ASSERT_EQ(cudaMalloc(&d3, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(d3), cudaSuccess);
  // After the test-only reset, device 7 works again.
  vgpu::reset_device_for_testing(7);
  ASSERT_EQ(cudaSetDevice(7), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeError, EveryCodeHasANameAndAString) {
  const cudaError_t codes[] = {cudaSuccess,
                               cudaErrorInvalidValue,
                               cudaErrorMemoryAllocation,
                               cudaErrorInitializationError,
                               cudaErrorInvalidConfiguration,
                               cudaErrorInvalidDevicePointer,
                               cudaErrorInvalidMemcpyDirection,
                               cudaErrorInsufficientDriver,
                               cudaErrorNoDevice,
                               cudaErrorInvalidDevice,
                               cudaErrorInvalidResourceHandle,
                               cudaErrorNotReady,
                               cudaErrorIllegalAddress,
                               cudaErrorLaunchOutOfResources,
                               cudaErrorLaunchTimeout,
                               cudaErrorAssert,
                               cudaErrorLaunchFailure,
                               cudaErrorNotSupported,
                               cudaErrorUnknown};
  std::set<std::string> names, strings;
  for (cudaError_t c : codes) {
    names.insert(cudaGetErrorName(c));
    strings.insert(cudaGetErrorString(c));
  }
  EXPECT_EQ(names.size(), std::size(codes));
  EXPECT_EQ(strings.size(), std::size(codes));
  EXPECT_STREQ(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorIllegalAddress), "an illegal memory access was encountered");
}

}  // namespace
