// Streams: real asynchrony, FIFO order, queries, destruction with pending work, the legacy
// default stream's synchronisation with blocking (not non-blocking) streams, and enqueue().
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/test_util.h"

namespace {
using vgpu_test::Gate;

TEST(RuntimeStream, LaunchReturnsBeforeTheWorkRuns) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  int ran = 0;
  gate.block(s);
  ASSERT_EQ(cudaLaunchHostFunc(s, vgpu_test::set_flag, &ran), cudaSuccess);
  // The host got here while the worker is held in the gate: the item after it has not run.
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(*static_cast<volatile int*>(&ran), 0);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeStream, WorkRunsInQueueOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<int> order;
  for (int i = 0; i < 100; ++i)
    vgpu::enqueue(s, vgpu::capture_site("test item"), {}, [&order, i] {
      order.push_back(i);
      return cudaSuccess;
    });
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeStream, NotReadyBecomesTheLastErrorUntilCleared) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGetLastError();
  Gate gate;
  gate.block(s);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotReady);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);  // still there: success does not clear it
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeStream, DestroyWithPendingWorkReturnsAtOnceAndTheWorkCompletes) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  int ran = 0;
  gate.block(s);
  ASSERT_EQ(cudaLaunchHostFunc(s, vgpu_test::set_flag, &ran), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);  // returns although the gate is closed
  gate.release();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // waits for the destroyed stream's work too
  EXPECT_EQ(ran, 1);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
  EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "use after destroy: cudaStreamQuery used stream #"));
  cudaGetLastError();
}

// Work in a blocking stream waits for earlier legacy-stream work; non-blocking streams do not.
TEST(RuntimeStream, LegacyDefaultStreamBlocksBlockingStreamsOnly) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  gate.block(nullptr);  // the legacy default stream of device 0
  int b_ran = 0, nb_ran = 0;
  ASSERT_EQ(cudaLaunchHostFunc(blocking, vgpu_test::set_flag, &b_ran), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(nonblocking, vgpu_test::set_flag, &nb_ran), cudaSuccess);
  EXPECT_EQ(vgpu_test::wait_stream_polling(nonblocking), cudaSuccess);  // ran although legacy is held
  EXPECT_EQ(nb_ran, 1);
  EXPECT_EQ(cudaStreamQuery(blocking), cudaErrorNotReady);  // waits behind the legacy stream
  EXPECT_EQ(*static_cast<volatile int*>(&b_ran), 0);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
  EXPECT_EQ(b_ran, 1);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
}

// Work in the legacy stream waits for earlier work of blocking streams; not of non-blocking ones.
TEST(RuntimeStream, LegacyDefaultStreamWaitsForBlockingStreams) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  Gate held_nb;
  held_nb.block(nonblocking);
  int first = 0;
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, vgpu_test::set_flag, &first), cudaSuccess);
  EXPECT_EQ(vgpu_test::wait_stream_polling(nullptr), cudaSuccess);  // not held by the non-blocking stream
  EXPECT_EQ(first, 1);
  Gate held_b;
  held_b.block(blocking);
  int second = 0;
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, vgpu_test::set_flag, &second), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  EXPECT_EQ(*static_cast<volatile int*>(&second), 0);
  held_b.release();
  held_nb.release();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(second, 1);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
}

TEST(RuntimeStream, WorkErrorIsReturnedByTheNextSynchronizeThenCleared) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  vgpu::enqueue(s, vgpu::capture_site("failing item"), {}, [] { return cudaErrorLaunchOutOfResources; });
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorLaunchOutOfResources);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeStream, HostFunctionCallingTheApiIsAViolation) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  vgpu::CaptureViolations cap;
  std::atomic<int> result{-1};
  struct Ctx {
    cudaStream_t s;
    std::atomic<int>* result;
  } ctx{s, &result};
  ASSERT_EQ(cudaLaunchHostFunc(
                s, [](void* p) {
                  auto* c = static_cast<Ctx*>(p);
                  c->result->store(cudaStreamQuery(c->s));
                },
                &ctx),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(result.load(), cudaErrorNotSupported);
  EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "API call in host function: cudaStreamQuery"));
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeStream, StreamOfTheRightDeviceAndInvalidFlags) {
  vgpu_test::AtLeastDevices devices(8);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x10), cudaErrorInvalidValue);
  ASSERT_EQ(cudaSetDevice(3), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(vgpu::stream_device(s), 3);
  EXPECT_EQ(vgpu::stream_device(nullptr), 0);
  EXPECT_EQ(vgpu::resolve_stream(nullptr), vgpu::resolve_stream(nullptr));
  EXPECT_NE(vgpu::resolve_stream(nullptr), nullptr);
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

}  // namespace

namespace {

// Several host threads, each with its own device and streams, copy, wait on events and free
// concurrently: data arrives intact and nothing is reported (no lost ordering, no false races).
TEST(RuntimeStream, ConcurrentThreadsWithTheirOwnStreamsStayCorrect) {
  constexpr int kThreads = 5, kRounds = 100, kN = 256;
  vgpu_test::AtLeastDevices devices(8);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &bad] {
      cudaSetDevice(t);
      cudaStream_t s1, s2;
      cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
      cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
      cudaEvent_t ev;
      cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
      int *pin, *a, *b;
      cudaMallocHost(reinterpret_cast<void**>(&pin), kN * sizeof(int));
      cudaMalloc(reinterpret_cast<void**>(&a), kN * sizeof(int));
      cudaMalloc(reinterpret_cast<void**>(&b), kN * sizeof(int));
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kN; ++i) pin[i] = t * 100000 + r * 1000 + i;
        cudaMemcpyAsync(a, pin, kN * sizeof(int), cudaMemcpyHostToDevice, s1);
        cudaEventRecord(ev, s1);
        cudaStreamWaitEvent(s2, ev, 0);
        cudaMemcpyAsync(b, a, kN * sizeof(int), cudaMemcpyDeviceToDevice, s2);
        cudaEventRecord(ev, s2);
        cudaStreamWaitEvent(s1, ev, 0);  // the next round's write of `a` waits for this read
        void* scratch;
        cudaMalloc(&scratch, 1024 + r);
        cudaFree(scratch);
        std::vector<int> back(kN);
        cudaMemcpyAsync(back.data(), b, kN * sizeof(int), cudaMemcpyDeviceToHost, s2);  // pageable: synchronous
        for (int i = 0; i < kN; ++i)
          if (back[i] != t * 100000 + r * 1000 + i) ++bad;
      }
      cudaDeviceSynchronize();
      cudaFree(a);
      cudaFree(b);
      cudaFreeHost(pin);
      cudaEventDestroy(ev);
      cudaStreamDestroy(s1);
      cudaStreamDestroy(s2);
      if (cudaGetLastError() != cudaSuccess) ++bad;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace

namespace {
// Where a stream item ran, and whether the stream had completed it when enqueue returned.
struct Ran {
  std::atomic<bool> here{false}, ran{false};
};
void enqueue_probe(cudaStream_t s, Ran& r, bool self_contained, std::vector<vgpu::Range> ranges = {}) {
  const std::thread::id caller = std::this_thread::get_id();
  vgpu::enqueue(
      s, vgpu::capture_site("probe item"), std::move(ranges),
      [&r, caller] {
        r.here = std::this_thread::get_id() == caller;
        r.ran = true;
        return cudaSuccess;
      },
      self_contained);
}
}  // namespace

// Self-contained work on an idle stream runs on the calling thread before enqueue returns (a GPU
// that finished it at once); behind pending work, or work that may wait on others (a collective,
// a host function), or work on pinned host memory, runs on the worker in queue order.
TEST(RuntimeStream, SelfContainedWorkOnAnIdleStreamRunsOnTheCallingThread) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Ran idle, other, behind, pinned_work;
  enqueue_probe(s, idle, true);
  EXPECT_TRUE(idle.ran.load());
  EXPECT_TRUE(idle.here.load());
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  enqueue_probe(s, other, false);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_FALSE(other.here.load());
  Gate gate;
  gate.block(s);
  enqueue_probe(s, behind, true);
  EXPECT_FALSE(behind.ran.load());
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(behind.ran.load());
  EXPECT_FALSE(behind.here.load());
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  enqueue_probe(s, pinned_work, true, {vgpu::Range{pinned, 64, vgpu::Access::Write}});
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_FALSE(pinned_work.here.load());
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Work run on the calling thread leaves that thread's CUDA state alone: its error goes to the
// stream (returned by the next synchronisation), not to the thread's last error.
TEST(RuntimeStream, WorkOnTheCallingThreadKeepsItsErrorOnTheStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGetLastError();
  vgpu::enqueue(
      s, vgpu::capture_site("failing item"), {},
      [] {
        cudaSetDevice(1);
        cudaSetDevice(-1);  // cudaErrorInvalidDevice, the running thread's last error
        return cudaErrorInvalidValue;
      },
      true);
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}
