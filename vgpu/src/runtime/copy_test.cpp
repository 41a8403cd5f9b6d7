// Copies and memset: round trips in every direction, the documented host synchronisation of
// each kind of memory, and the direction, extent, null and uninitialised-read checks.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/test_util.h"

namespace {
using vgpu_test::any_contains;

TEST(RuntimeCopy, HostDeviceHostRoundTrip) {
  std::vector<float> in(1000), out(1000, 0.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, in.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, in.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(a, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, a, in.size() * 4, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), b, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

TEST(RuntimeCopy, AsyncRoundTripThroughPinnedMemoryOnAStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int *pin_in, *pin_out, *d1, *d2;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pin_in), 64 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pin_out), 64 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d1), 64 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d2), 64 * sizeof(int)), cudaSuccess);
  for (int i = 0; i < 64; ++i) pin_in[i] = i * 3, pin_out[i] = -1;
  ASSERT_EQ(cudaMemcpyAsync(d1, pin_in, 64 * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d2, d1, 64 * sizeof(int), cudaMemcpyDefault, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pin_out, d2, 64 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(pin_out[i], i * 3);
  EXPECT_EQ(cudaFree(d1), cudaSuccess);
  EXPECT_EQ(cudaFree(d2), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pin_in), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pin_out), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeCopy, PageableSourceIsStagedAtTheCallSoTheBufferIsReusable) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  vgpu_test::Gate gate;
  gate.block(s);  // the copy cannot run before the gate opens
  std::vector<int> host(16, 7);
  int* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, host.data(), 16 * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  std::fill(host.begin(), host.end(), 9);  // reuse before the copy ran
  gate.release();
  std::vector<int> back(16, 0);
  // Device to pageable host memory is synchronous: back is filled when the call returns.
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d, 16 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(back, std::vector<int>(16, 7));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeCopy, MemsetFillsBytes) {
  unsigned char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 100), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0xAB, 100), cudaSuccess);
  ASSERT_EQ(cudaMemset(d + 10, 0x01, 5), cudaSuccess);
  unsigned char back[100];
  ASSERT_EQ(cudaMemcpy(back, d, 100, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(back[i], (i >= 10 && i < 15) ? 0x01 : 0xAB) << i;
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeCopy, WrongDirectionIsAViolationAndInvalidValue) {
  std::vector<char> host(64, 1), host2(64, 0);
  void* d;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    // Destination is pageable host memory, not device memory.
    EXPECT_EQ(cudaMemcpy(host2.data(), host.data(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    // Source is host memory but the kind says device to device.
    EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    ASSERT_EQ(cap.messages().size(), 2u);
    EXPECT_TRUE(any_contains(cap.messages(), "wrong copy direction: cudaMemcpy"));
    EXPECT_TRUE(any_contains(cap.messages(), "destination is pageable host memory"));
  }
  cudaGetLastError();
  // cudaMemcpyDefault infers the direction.
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host2.data(), d, 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(host, host2);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeCopy, OverrunningAnAllocationCopiesNothing) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 64), cudaSuccess);
  std::vector<char> host(128, 5);
  {
    vgpu::CaptureViolations cap;
    EXPECT_EQ(cudaMemcpy(d + 32, host.data(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemsetAsync(d, 1, 65), cudaErrorInvalidValue);
    ASSERT_EQ(cap.messages().size(), 2u);
    EXPECT_TRUE(any_contains(cap.messages(), "out of bounds: cudaMemcpy destination uses bytes [32, 96)"));
    EXPECT_TRUE(any_contains(cap.messages(), "overrunning its end by 32 byte(s)"));
  }
  cudaGetLastError();
  std::vector<char> back(64, 9);
  ASSERT_EQ(cudaMemcpy(back.data(), d, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<char>(64, 0));  // nothing was copied
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeCopy, ReadingNeverWrittenDeviceMemoryIsReported) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 256), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 100), cudaSuccess);
  std::vector<char> back(256);
  {
    vgpu::CaptureViolations cap;
    EXPECT_EQ(cudaMemcpy(back.data(), d, 100, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty());
    EXPECT_EQ(cudaMemcpy(back.data(), d, 101, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cap.messages().size(), 1u);
    EXPECT_TRUE(any_contains(cap.messages(), "uninitialized read: cudaMemcpy source reads bytes [0, 101)"));
    EXPECT_TRUE(any_contains(cap.messages(), "1 of them (the first at offset 100)"));
  }
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeCopy, NullAndZeroSizedCopies) {
  void* d;
  ASSERT_EQ(cudaMalloc(&d, 16), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, nullptr, 0, cudaMemcpyHostToDevice), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    EXPECT_EQ(cudaMemcpy(d, nullptr, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemset(nullptr, 0, 4), cudaErrorInvalidValue);
    EXPECT_EQ(cap.messages().size(), 2u);
  }
  cudaGetLastError();
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

}  // namespace
