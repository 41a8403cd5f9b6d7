// Race checker: a planted cross-stream race is reported with both sites; the same accesses
// ordered by an event and cudaStreamWaitEvent, or by host synchronisation, are not.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/test_util.h"

namespace {
using vgpu_test::any_contains;

struct TwoStreams {
  cudaStream_t a, b;
  char *buf, *other;
  TwoStreams() {
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaMalloc(reinterpret_cast<void**>(&buf), 4096);
    cudaMalloc(reinterpret_cast<void**>(&other), 4096);
  }
  ~TwoStreams() {
    cudaFree(buf);
    cudaFree(other);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
  }
};

TEST(RuntimeRace, UnorderedWriteThenReadOnAnotherStreamIsReported) {
  TwoStreams t;
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemsetAsync(t.buf, 1, 4096, t.a), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_FALSE(m.empty());
  EXPECT_TRUE(any_contains(m, "race: cudaMemcpyAsync on stream #"));
  EXPECT_TRUE(any_contains(m, "reads bytes [0, 4096) of allocation #"));
  EXPECT_TRUE(any_contains(m, "which cudaMemsetAsync on stream #"));
  EXPECT_TRUE(any_contains(m, "first:  cudaMemsetAsync"));
  EXPECT_TRUE(any_contains(m, "second: cudaMemcpyAsync"));
}

TEST(RuntimeRace, EventAndStreamWaitEventOrderTheAccesses) {
  TwoStreams t;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemsetAsync(t.buf, 1, 4096, t.a), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, t.a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(t.b, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.b), cudaSuccess);
  // ... and the next write on a must wait for b's read too.
  ASSERT_EQ(cudaEventRecord(e, t.b), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(t.a, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf, 2, 4096, t.a), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

TEST(RuntimeRace, EventRecordedBeforeTheWriteDoesNotOrderIt) {
  TwoStreams t;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaEventRecord(e, t.a), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf, 1, 4096, t.a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(t.b, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(any_contains(cap.messages(), "race: cudaMemcpyAsync"));
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

TEST(RuntimeRace, HostSynchronizationOrdersTheAccesses) {
  TwoStreams t;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemsetAsync(t.buf, 1, 4096, t.a), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(t.a), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, t.b), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf, 2, 4096, t.a), cudaSuccess);
  ASSERT_EQ(vgpu_test::wait_stream_polling(t.a), cudaSuccess);  // a successful query synchronises too
  ASSERT_EQ(cudaMemsetAsync(t.buf, 3, 4096, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

TEST(RuntimeRace, ConcurrentReadsAndDisjointWritesAreNoRace) {
  TwoStreams t;
  ASSERT_EQ(cudaMemset(t.buf, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 1024, cudaMemcpyDeviceToDevice, t.a), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(t.other + 2048, t.buf, 1024, cudaMemcpyDeviceToDevice, t.b), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf + 2048, 1, 1024, t.a), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf + 3072, 1, 1024, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
}

TEST(RuntimeRace, WriteAfterAnUnorderedReadIsReported) {
  TwoStreams t;
  ASSERT_EQ(cudaMemset(t.buf, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.a), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(t.buf + 100, 1, 10, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cap.messages().size(), 1u);
  EXPECT_TRUE(any_contains(cap.messages(), "race: cudaMemsetAsync on stream #"));
  EXPECT_TRUE(any_contains(cap.messages(), "writes bytes [100, 110)"));
}

// The legacy default stream orders itself with blocking streams; a non-blocking stream is not.
TEST(RuntimeRace, LegacyStreamOrdersBlockingStreamsOnly) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  char *buf, *other;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 256), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&other), 256), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemset(buf, 1, 256), cudaSuccess);  // legacy stream, asynchronous
    ASSERT_EQ(cudaMemcpyAsync(other, buf, 256, cudaMemcpyDeviceToDevice, blocking), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty());
    ASSERT_EQ(cudaMemset(buf, 2, 256), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(other, buf, 256, cudaMemcpyDeviceToDevice, nonblocking), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(any_contains(cap.messages(), "which cudaMemset (asynchronous to the host) on the legacy default stream of device 0 wrote"));
  }
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  EXPECT_EQ(cudaFree(other), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
}

// cudaMemcpy from pageable memory returns once the source is staged ("the DMA to final
// destination may not have completed"): it does not order a non-blocking stream's later read.
// From pinned memory it is synchronous, and does.
TEST(RuntimeRace, PageableCudaMemcpyToDeviceDoesNotOrderNonBlockingStreams) {
  TwoStreams t;
  std::vector<char> pageable(4096, 1);
  char* pinned;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4096), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpy(t.buf, pinned, 4096, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.a), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(t.a), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
    ASSERT_EQ(cudaMemcpy(t.buf, pageable.data(), 4096, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(t.other, t.buf, 4096, cudaMemcpyDeviceToDevice, t.a), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(any_contains(cap.messages(), "which cudaMemcpy (from pageable memory: returns once the source is staged"));
  }
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST(RuntimeRace, PinnedHostBuffersAreCheckedToo) {
  TwoStreams t;
  ASSERT_EQ(cudaMemset(t.buf, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  char* pinned;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4096), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpyAsync(pinned, t.buf, 4096, cudaMemcpyDeviceToHost, t.a), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(t.other, pinned, 4096, cudaMemcpyHostToDevice, t.b), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(any_contains(cap.messages(), "of pinned host memory"));
  }
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// Long runs stay correct after many ordered accesses (the per-allocation history is pruned and
// capped): a final unordered write is still reported once.
TEST(RuntimeRace, ManyOrderedAccessesThenOneRace) {
  TwoStreams t;
  ASSERT_EQ(cudaMemset(t.buf, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  vgpu::CaptureViolations cap;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(cudaMemcpyAsync(t.other + (i % 4) * 1024, t.buf + (i % 16) * 256, 256, cudaMemcpyDeviceToDevice, t.a),
              cudaSuccess);
    if (i % 100 == 99) ASSERT_EQ(cudaMemsetAsync(t.buf, i & 0xff, 4096, t.a), cudaSuccess);
  }
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
  ASSERT_EQ(cudaMemsetAsync(t.buf + 4000, 7, 8, t.b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cap.messages().size(), 1u);
  EXPECT_TRUE(any_contains(cap.messages(), "race: cudaMemsetAsync on stream #"));
}

}  // namespace
