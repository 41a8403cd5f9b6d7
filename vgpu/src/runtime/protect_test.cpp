// Device memory that host code cannot touch (runtime/protect.h): plain loads and stores of this
// file (not instrumented, so only the protection sees them) on device memory are reported with
// the address, the allocation and the host's frame, from any host thread, while kernels and
// copies on other threads go on; a stream's host function is host code too.
#include <gtest/gtest.h>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "runtime/test_util.h"

namespace {

using vgpu_test::any_contains;
using vgpu_test::joined;

struct Device {
  int* x = nullptr;
  Device() {
    EXPECT_EQ(cudaMalloc(&x, 64 * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMemset(x, 0, 64 * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Device() { cudaFree(x); }
};

[[gnu::noinline]] int host_reads(const int* p) { return *static_cast<const volatile int*>(p); }
[[gnu::noinline]] void host_writes(int* p, int v) { *static_cast<volatile int*>(p) = v; }

TEST(DeviceMemoryProtection, IsOnWithTheMemoryFile) {
  Device d;
  EXPECT_NE(std::string(vgpu::device_memory_protection()), "off");
}

TEST(DeviceMemoryProtection, AHostLoadIsReportedWithTheAllocationAndTheFrame) {
  Device d;
  vgpu::CaptureViolations cap;
  const int v = host_reads(d.x + 3);  // planted: the host dereferences a device pointer
  EXPECT_EQ(v, 0);                    // captured: the load went on
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "host access to device memory: the host reads device memory at 0x")) << joined(m);
  EXPECT_TRUE(any_contains(m, ", byte offset 12 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "host_reads")) << joined(m);  // the host's frame
}

TEST(DeviceMemoryProtection, AHostStoreIsReported) {
  Device d;
  {
    vgpu::CaptureViolations cap;
    host_writes(d.x + 5, 7);  // planted
    const auto m = cap.messages();
    ASSERT_EQ(m.size(), 1u) << joined(m);
    EXPECT_TRUE(any_contains(m, "the host writes device memory at 0x", "byte offset 20 of allocation #")) << joined(m);
  }
  int h = 0;
  ASSERT_EQ(cudaMemcpy(&h, d.x + 5, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 7);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(host_reads(d.x + 5), 7);  // the access was lent until the capture ended: closed again
  EXPECT_EQ(cap.messages().size(), 1u) << joined(cap.messages());
}

TEST(DeviceMemoryProtection, AHostAccessStopsTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Device d;
        host_reads(d.x + 1);
      },
      "vgpu: host access to device memory: the host reads device memory at 0x[0-9a-f]+, byte offset 4 of "
      "allocation #[0-9]+");
}

TEST(DeviceMemoryProtection, AHelperThatSaysSoMayTouchDeviceMemory) {
  Device d;
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;
    host_writes(d.x, 3);
    EXPECT_EQ(host_reads(d.x), 3);
  }
  EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  host_reads(d.x);  // and no longer after
  EXPECT_EQ(cap.messages().size(), 1u) << joined(cap.messages());
}

TEST(DeviceMemoryProtection, AStreamsHostFunctionIsHostCode) {
  Device d;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaLaunchHostFunc(
                s, [](void* p) { host_reads(static_cast<int*>(p)); }, d.x),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(any_contains(cap.messages(), "host access to device memory: the host reads")) << joined(cap.messages());
  cudaStreamDestroy(s);
}

__global__ void spin_add(int* x, int n, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] += 1;
}

// Kernels and copies run on stream workers while host threads touch device memory: each host
// access is reported, no kernel or copy is, and the kernels' results are whole.
TEST(DeviceMemoryProtection, HostThreadsAreCheckedWhileKernelsRunOnOtherThreads) {
  Device work, target;
  vgpu::CaptureViolations cap;
  std::atomic<bool> stop{false};
  std::thread device_side([&] {
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
    for (int k = 0; k < 20; ++k) {
      vgpu::launch("spin_add", __FILE__, __LINE__, dim3(1), dim3(64), 0, s, spin_add)(work.x, 64, 50);
      EXPECT_EQ(cudaMemsetAsync(target.x + 32, 0, 32 * sizeof(int), s), cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
    stop = true;
  });
  int reads = 0;
  while (!stop.load() || reads < 3) {
    host_reads(target.x + (reads % 16));  // planted, 3 times or more
    ++reads;
    std::this_thread::yield();
  }
  device_side.join();
  const auto m = cap.messages();
  size_t host = 0;
  for (const std::string& s : m) host += s.find("host access to device memory: the host reads") == 0;
  EXPECT_EQ(host, m.size()) << joined(m);  // nothing but the host's reads
  EXPECT_GE(host, 1u) << joined(m);
  std::vector<int> out(64);
  ASSERT_EQ(cudaMemcpy(out.data(), work.x, 64 * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int v : out) ASSERT_EQ(v, 20 * 50);
}

}  // namespace
