// Events: never-recorded events, pending and completed queries, elapsed time rules,
// cudaStreamWaitEvent ordering, destruction with a pending record, and the live-event count.
#include <gtest/gtest.h>

#include "runtime/test_util.h"

namespace {
using vgpu_test::Gate;

TEST(RuntimeEvent, NeverRecordedEventQueriesAsComplete) {
  cudaEvent_t e, f;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&f), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, f), cudaErrorInvalidResourceHandle);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaSuccess);  // a no-op
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(f), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeEvent, PendingRecordIsNotReadyAndElapsedTimeNeedsBothComplete) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  Gate gate;
  gate.block(s);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(stop), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  float ms = -1;
  EXPECT_EQ(cudaEventSynchronize(start), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);
  gate.release();
  EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(stop), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.f);
  EXPECT_EQ(cudaEventElapsedTime(nullptr, start, stop), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeEvent, DisableTimingEventsHaveNoElapsedTime) {
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  float ms;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(b), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeEvent, StreamWaitEventHoldsTheWaitingStream) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  Gate gate;
  gate.block(a);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  Gate later;  // recorded again after the wait: the wait keeps the record it saw
  later.block(a);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  int ran = 0;
  ASSERT_EQ(cudaLaunchHostFunc(b, vgpu_test::set_flag, &ran), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(b), cudaErrorNotReady);
  EXPECT_EQ(*static_cast<volatile int*>(&ran), 0);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);  // does not need `later`
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaStreamWaitEvent(b, e, 5), cudaErrorInvalidValue);
  later.release();
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeEvent, LiveEventCountFollowsCreateAndDestroy) {
  const size_t before = vgpu::live_events();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e[3];
  for (auto& x : e) ASSERT_EQ(cudaEventCreate(&x), cudaSuccess);
  EXPECT_EQ(vgpu::live_events(), before + 3);
  Gate gate;
  gate.block(s);
  ASSERT_EQ(cudaEventRecord(e[0], s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e[0]), cudaSuccess);  // pending: released once complete
  EXPECT_EQ(cudaEventDestroy(e[1]), cudaSuccess);
  EXPECT_EQ(vgpu::live_events(), before + 1);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e[2]), cudaSuccess);
  EXPECT_EQ(vgpu::live_events(), before);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeEvent, RecordOnAStreamOfAnotherDeviceIsRejected) {
  vgpu_test::AtLeastDevices devices(8);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    EXPECT_EQ(cudaEventRecord(e, s), cudaErrorInvalidResourceHandle);
    EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "wrong device: cudaEventRecord"));
  }
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  cudaGetLastError();
}

}  // namespace
