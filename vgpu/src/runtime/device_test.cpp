// Devices: count and properties of the virtual devices, and VGPU_DEVICES=0 behaving as a machine
// without a GPU (through the test-only set_device_count_for_testing).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "runtime/test_util.h"

namespace {

TEST(RuntimeDevice, PropertiesDescribeTheVirtualDevice) {
  vgpu_test::AtLeastDevices devices(8);
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_GE(n, 1);
  cudaDeviceProp p;
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_NE(std::string(p.name).find("vgpu"), std::string::npos);
  EXPECT_EQ(p.major, 9);
  EXPECT_EQ(p.warpSize, 32);
  EXPECT_EQ(p.maxThreadsPerBlock, 1024);
  int v = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(v, 132);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, 0), cudaSuccess);
  EXPECT_EQ(v, 48 * 1024);
  EXPECT_EQ(cudaGetDeviceProperties(&p, n), cudaErrorInvalidDevice);
  int peer = -1;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&peer, 0, 1), cudaSuccess);
  EXPECT_EQ(peer, 1);
  int rt = 0, drv = 0;
  EXPECT_EQ(cudaRuntimeGetVersion(&rt), cudaSuccess);
  EXPECT_EQ(cudaDriverGetVersion(&drv), cudaSuccess);
  EXPECT_EQ(rt, 13000);
  EXPECT_EQ(drv, 13000);
  cudaGetLastError();
}

TEST(RuntimeDevice, ZeroDevicesBehavesAsNoGpu) {
  vgpu::set_device_count_for_testing(0);
  int n = -1;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  EXPECT_EQ(n, 0);
  void* p;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorNoDevice);
  EXPECT_EQ(cudaSetDevice(0), cudaErrorNoDevice);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreate(&s), cudaErrorNoDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  vgpu::set_device_count_for_testing(-1);  // back to VGPU_DEVICES (default 8)
  EXPECT_EQ(cudaGetDeviceCount(&n), vgpu::device_count() > 0 ? cudaSuccess : cudaErrorNoDevice);
  cudaGetLastError();
}

}  // namespace
