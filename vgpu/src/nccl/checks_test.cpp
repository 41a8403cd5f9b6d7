// Planted NCCL bugs the vgpu reports: mismatched collectives and send/receive pairs, overruns,
// uninitialised inputs, a stream of another device, overlapping buffers, a failed call in a group.
#include <vector>

#include "nccl/nccl_test_util.h"

namespace {

using namespace nccl_test;

// Two ranks on devices 0 and 1 driven from this thread, each with a blocking stream.
struct Pair {
  Pair() {
    const int devs[] = {0, 1};
    EXPECT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      EXPECT_EQ(cudaStreamCreate(&streams[r]), cudaSuccess);
    }
    cudaSetDevice(0);
  }
  ~Pair() {
    for (int r = 0; r < 2; ++r) {
      cudaStreamSynchronize(streams[r]);
      cudaStreamDestroy(streams[r]);
      if (comms[r]) ncclCommDestroy(comms[r]);
    }
    cudaSetDevice(0);
  }
  template <class T>
  T* on(int r, const std::vector<T>& v) {
    cudaSetDevice(r);
    T* p = device_copy(v);
    cudaSetDevice(0);
    return p;
  }
  void sync() {
    for (int r = 0; r < 2; ++r) EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
  }
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
};

TEST(NcclChecks, MismatchedCountAcrossRanksIsReportedWithEveryRanksCall) {
  Watchdog watchdog;
  Pair p;
  float* x0 = p.on(0, std::vector<float>(8, 1));
  float* x1 = p.on(1, std::vector<float>(8, 2));
  vgpu::CaptureViolations cap;
  ASSERT_EQ(ncclAllReduce(x0, x0, 4, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x1, x1, 8, ncclFloat32, ncclSum, p.comms[1], p.streams[1]), ncclSuccess);
  p.sync();  // a mismatch completes (with an error) rather than hanging
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"mismatched collective", "collective #0", "the counts differ",
                               "rank 0: ncclAllReduce(count 4, ncclFloat32, ncclSum) called at ncclAllReduce",
                               "rank 1: ncclAllReduce(count 8, ncclFloat32, ncclSum) called at ncclAllReduce"}))
      << joined(m);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(p.comms[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage);
  }
  EXPECT_NE(std::string(ncclGetLastError(p.comms[0])).find("the counts differ"), std::string::npos);
  EXPECT_EQ(host_copy(x0, 8), std::vector<float>(8, 1));  // nothing was reduced
  cudaFree(x0);
  cudaFree(x1);
}

TEST(NcclChecks, MismatchedRootAndOpAreReported) {
  Watchdog watchdog;
  Pair p;
  float* x0 = p.on(0, std::vector<float>(4, 1));
  float* x1 = p.on(1, std::vector<float>(4, 2));
  vgpu::CaptureViolations cap;
  ASSERT_EQ(ncclBroadcast(x0, x0, 4, ncclFloat32, 0, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclBroadcast(x1, x1, 4, ncclFloat32, 1, p.comms[1], p.streams[1]), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x0, x0, 4, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x1, x1, 4, ncclFloat32, ncclMax, p.comms[1], p.streams[1]), ncclSuccess);
  p.sync();
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"collective #0", "the roots differ", "ncclBroadcast(count 4, ncclFloat32, root 1)"}));
  EXPECT_TRUE(any_contains(m, {"collective #1", "the reduction ops differ", "ncclMax"}));
  cudaFree(x0);
  cudaFree(x1);
}

// 16-bit data: one rank passes bf16, the other f16 (the same element size, so the counts and
// byte extents agree): reported, nothing reduced. The same for a send and its receive.
TEST(NcclChecks, MismatchedSixteenBitDatatypesAreReported) {
  Watchdog watchdog;
  Pair p;
  uint16_t* x0 = p.on(0, std::vector<uint16_t>(8, 0x3f80));  // 1.0 in bf16
  uint16_t* x1 = p.on(1, std::vector<uint16_t>(8, 0x3c00));  // 1.0 in f16
  vgpu::CaptureViolations cap;
  ASSERT_EQ(ncclAllReduce(x0, x0, 8, ncclBfloat16, ncclSum, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x1, x1, 8, ncclFloat16, ncclSum, p.comms[1], p.streams[1]), ncclSuccess);
  p.sync();
  ASSERT_EQ(cap.messages().size(), 1u) << joined(cap.messages());
  EXPECT_TRUE(any_contains(cap.messages(), {"mismatched collective", "the datatypes differ",
                                            "ncclAllReduce(count 8, ncclBfloat16, ncclSum)",
                                            "ncclAllReduce(count 8, ncclFloat16, ncclSum)"}))
      << joined(cap.messages());
  EXPECT_EQ(host_copy(x0, 8), std::vector<uint16_t>(8, 0x3f80));  // nothing was reduced
  cudaFree(x0);
  cudaFree(x1);
}

TEST(NcclChecks, SendAndReceiveOfDifferentSixteenBitDatatypesAreReported) {
  Watchdog watchdog;
  Pair p;
  uint16_t* a = p.on(0, std::vector<uint16_t>(8, 0x3f80));
  uint16_t* b = p.on(1, std::vector<uint16_t>(8, 0));
  vgpu::CaptureViolations cap;
  ASSERT_EQ(ncclSend(a, 8, ncclBfloat16, 1, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(b, 8, ncclFloat16, 0, p.comms[1], p.streams[1]), ncclSuccess);
  p.sync();
  EXPECT_TRUE(any_contains(cap.messages(), {"mismatched send/recv", "the datatypes differ",
                                            "ncclSend(count 8, ncclBfloat16, peer 1)",
                                            "ncclRecv(count 8, ncclFloat16, peer 0)"}))
      << joined(cap.messages());
  cudaFree(a);
  cudaFree(b);
}

TEST(NcclChecks, SendAndReceiveThatDisagreeAreReported) {
  Watchdog watchdog;
  Pair p;
  float* a = p.on(0, std::vector<float>(8, 1));
  float* b = p.on(1, std::vector<float>(8, -1));
  vgpu::CaptureViolations cap;
  ASSERT_EQ(ncclSend(a, 8, ncclFloat32, 1, p.comms[0], p.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(b, 4, ncclFloat32, 0, p.comms[1], p.streams[1]), ncclSuccess);
  p.sync();
  const auto m = cap.messages();
  EXPECT_TRUE(
      any_contains(m, {"mismatched send/recv", "ncclSend from rank 0 and the ncclRecv of rank 1", "the counts differ",
                       "ncclSend(count 8, ncclFloat32, peer 1)", "ncclRecv(count 4, ncclFloat32, peer 0)"}))
      << joined(m);
  EXPECT_EQ(host_copy(b, 8), std::vector<float>(8, -1));
  cudaFree(a);
  cudaFree(b);
}

TEST(NcclChecks, OverrunningBufferIsReportedAndRejected) {
  Watchdog watchdog;
  Pair p;
  float* x = p.on(0, std::vector<float>(10, 1));
  float* big = p.on(0, std::vector<float>(40, 1));
  vgpu::CaptureViolations cap;
  EXPECT_EQ(ncclAllReduce(x, x, 11, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclInvalidArgument);
  // AllGather's recvbuff holds nranks * sendcount elements.
  EXPECT_EQ(ncclAllGather(big, x, 6, ncclFloat32, p.comms[0], p.streams[0]), ncclInvalidArgument);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"ncclAllReduce sendbuff (rank 0)", "overrunning its end by 4 byte(s)"})) << joined(m);
  EXPECT_TRUE(any_contains(m, {"ncclAllGather recvbuff (rank 0)", "overrunning its end by 8 byte(s)"})) << joined(m);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclAllGather recvbuff"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(nullptr, x, 1, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclInvalidArgument);
  cudaFree(x);
  cudaFree(big);
}

TEST(NcclChecks, UninitialisedSendBufferIsReported) {
  Watchdog watchdog;
  Pair p;
  std::vector<float*> x(2);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x[size_t(r)]), 16), cudaSuccess);  // never written
  }
  cudaSetDevice(0);
  vgpu::CaptureViolations cap;
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(x[size_t(r)], x[size_t(r)], 4, ncclFloat32, ncclSum, p.comms[r], p.streams[r]),
              ncclSuccess);
  p.sync();
  const auto m = cap.messages();
  EXPECT_TRUE(any_contains(m, {"ncclAllReduce sendbuff of rank 0 reads bytes [0, 16)", "never written"})) << joined(m);
  EXPECT_TRUE(any_contains(m, {"ncclAllReduce sendbuff of rank 1"})) << joined(m);
  cudaFree(x[0]);
  cudaFree(x[1]);
}

TEST(NcclChecks, StreamOfAnotherDeviceIsReported) {
  Watchdog watchdog;
  Pair p;
  float* x = p.on(0, std::vector<float>(4, 1));
  vgpu::CaptureViolations cap;
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, p.comms[0], p.streams[1]), ncclUnhandledCudaError);
  EXPECT_TRUE(any_contains(cap.messages(), {"nccl wrong device", "stream of device 1", "rank 0"}))
      << joined(cap.messages());
  cudaFree(x);
}

TEST(NcclChecks, OverlappingBuffersOutsideTheInPlaceLayoutAreReported) {
  Watchdog watchdog;
  Pair p;
  float* x = p.on(0, std::vector<float>(16, 1));
  vgpu::CaptureViolations cap;
  EXPECT_EQ(ncclAllReduce(x, x + 1, 4, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclInvalidArgument);
  // Rank 0's in-place AllGather input is chunk 0 of its output: x; chunk 1 is not it.
  EXPECT_EQ(ncclAllGather(x + 2, x, 2, ncclFloat32, p.comms[0], p.streams[0]), ncclInvalidArgument);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"nccl overlapping buffers", "ncclAllReduce", "sendbuff == recvbuff"}));
  EXPECT_TRUE(any_contains(m, {"ncclAllGather", "sendbuff == recvbuff + rank*sendcount"}));
  cudaFree(x);
}

TEST(NcclChecks, AFailedCallInsideAGroupFailsTheWholeGroup) {
  Watchdog watchdog;
  Pair p;
  float* x0 = p.on(0, std::vector<float>(4, 1));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x0, x0, 4, ncclFloat32, ncclSum, p.comms[0], p.streams[0]), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x0, x0, 4, static_cast<ncclDataType_t>(42), ncclSum, p.comms[0], p.streams[0]),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("invalid datatype 42"), std::string::npos);
  EXPECT_EQ(cudaStreamQuery(p.streams[0]), cudaSuccess);  // nothing was queued (rank 1 never joins)
  EXPECT_EQ(host_copy(x0, 4), std::vector<float>(4, 1));
  cudaFree(x0);
}

}  // namespace
