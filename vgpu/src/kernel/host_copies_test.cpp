// The C library's memcpy, memmove and memset on device and pinned memory (kernel/host_copies.cpp),
// called from host code that is not instrumented (this file is not): a copy out of device memory
// with memcpy instead of cudaMemcpy, and a pinned buffer read before the copy into it finished.
#include <gtest/gtest.h>
#include <vgpu/runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/test_util.h"

namespace {

using vgpu_test::any_contains;
using vgpu_test::joined;

// A size the compiler cannot see, so that each copy is a call of the C library's function, as in
// any copy of a run-time size.
size_t bytes_of(size_t n) {
  static volatile size_t four = 4;
  return n * four;
}

struct Device {
  float* x = nullptr;
  Device() {
    EXPECT_EQ(cudaMalloc(&x, 64 * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemset(x, 0, 64 * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Device() { cudaFree(x); }
};

TEST(HostCopies, MemcpyOutOfDeviceMemoryIsReported) {
  Device d;
  float h[16];
  vgpu::CaptureViolations cap;
  std::memcpy(h, d.x + 4, bytes_of(16));  // planted: memcpy where cudaMemcpy belongs
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "host access to device memory: the host reads 64 byte(s) with memcpy at byte offset 16 "
                              "of allocation #"))
      << joined(m);
  EXPECT_TRUE(any_contains(m, "copy it with cudaMemcpy")) << joined(m);
}

TEST(HostCopies, MemsetAndStdCopyOnDeviceMemoryAreReported) {
  Device d;
  std::vector<float> v(8, 1.0f);
  vgpu::CaptureViolations cap;
  std::memset(d.x, 0, bytes_of(8));         // planted: memset where cudaMemset belongs
  std::copy(v.begin(), v.end(), d.x + 8);  // planted: a host copy into device memory (memmove)
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, "the host writes 32 byte(s) with memset at byte offset 0 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "the host writes 32 byte(s) with memmove at byte offset 32 of allocation #")) << joined(m);
}

// A staging buffer read with memcpy right after the device-to-host copy was queued: on a GPU the
// copy may not have run. Synchronised first, the same read is clean.
TEST(HostCopies, MemcpyOutOfPinnedMemoryBeforeTheCopyIntoItFinishedIsARace) {
  Device d;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64 * sizeof(float)), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<float> h(64);
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpyAsync(pinned, d.x, 64 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    std::memcpy(h.data(), pinned, bytes_of(64));  // planted: no cudaStreamSynchronize first
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const auto m = cap.messages();
    EXPECT_TRUE(any_contains(m, "race: the host reads 256 byte(s) with memcpy at byte offset 0 of allocation #"))
        << joined(m);
    EXPECT_TRUE(any_contains(m, "which cudaMemcpyAsync on stream #")) << joined(m);
  }
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpyAsync(pinned, d.x, 64 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::memcpy(h.data(), pinned, bytes_of(64));
    std::memset(pinned, 0, bytes_of(64));
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  }
  cudaStreamDestroy(s);
  cudaFreeHost(pinned);
}

// Host memory is not checked, and the functions still do their work (overlapping moves too).
TEST(HostCopies, HostMemoryIsUncheckedAndTheFunctionsWork) {
  vgpu::CaptureViolations cap;
  std::vector<char> a(100), b(100);
  for (int i = 0; i < 100; ++i) a[size_t(i)] = char(i);
  std::memcpy(b.data(), a.data(), bytes_of(25));
  EXPECT_EQ(b[99], 99);
  std::memmove(a.data() + 1, a.data(), bytes_of(24));  // bytes 0-95 to 1-96
  EXPECT_EQ(a[1], 0);
  EXPECT_EQ(a[96], 95);
  EXPECT_EQ(a[97], 97);
  std::memset(b.data(), 7, bytes_of(25));
  EXPECT_EQ(b[50], 7);
  EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
}

}  // namespace
