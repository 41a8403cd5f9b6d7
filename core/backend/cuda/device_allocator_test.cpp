// The caching device allocator: reuse on a stream, byte counts and peak, release, and that a
// block freed behind unfinished work on one stream is not handed to another stream.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"

namespace ptdp::cuda {
namespace {

#define PTDP_SKIP_WITHOUT_GPU()                                                    \
  do {                                                                             \
    std::string reason_;                                                           \
    if (device_count(&reason_) == 0) GTEST_SKIP() << "no GPU here: " << reason_;   \
  } while (0)

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    cudaStreamSynchronize(s);
    DeviceAllocator::for_device(0).forget_stream(s);
    cudaStreamDestroy(s);
  }
};

TEST(CudaAllocator, RoundsUpWithinAThirtySecondOfTheSize) {
  EXPECT_EQ(DeviceAllocator::round_up(0), 512u);
  EXPECT_EQ(DeviceAllocator::round_up(1), 512u);
  EXPECT_EQ(DeviceAllocator::round_up(512), 512u);
  EXPECT_EQ(DeviceAllocator::round_up(513), 1024u);
  for (size_t n : {size_t(1000), size_t(123457), size_t(1) << 20, size_t(3) << 28, size_t(987654321)}) {
    const size_t r = DeviceAllocator::round_up(n);
    EXPECT_GE(r, n);
    EXPECT_LE(r - n, n / 32 + 512) << n;
    EXPECT_EQ(r % 512, 0u);
  }
}

TEST(CudaAllocator, ReusesAFreedBlockOnTheSameStream) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream st;
  const size_t n = 1234567;
  void* p = al.allocate(n, st.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(p, 1, n, st.s));
  al.deallocate(p, n);
  void* q = al.allocate(n, st.s);  // no wait needed: the stream orders the two uses
  EXPECT_EQ(q, p);
  al.deallocate(q, n);
}

TEST(CudaAllocator, CountsBytesInUseAndThePeak) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream st;
  const size_t base = al.bytes_in_use();
  al.reset_peak();
  const size_t a = size_t(3) << 20, b = size_t(5) << 20;
  void* pa = al.allocate(a, st.s);
  void* pb = al.allocate(b, st.s);
  EXPECT_EQ(al.bytes_in_use(), base + DeviceAllocator::round_up(a) + DeviceAllocator::round_up(b));
  al.deallocate(pa, a);
  EXPECT_EQ(al.bytes_in_use(), base + DeviceAllocator::round_up(b));
  EXPECT_EQ(al.peak_bytes_in_use(), base + DeviceAllocator::round_up(a) + DeviceAllocator::round_up(b));
  EXPECT_GE(al.bytes_cached(), DeviceAllocator::round_up(a));
  al.reset_peak();
  EXPECT_EQ(al.peak_bytes_in_use(), base + DeviceAllocator::round_up(b));
  al.deallocate(pb, b);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st.s));
  al.release_cached();
  EXPECT_EQ(al.bytes_cached(), 0u);
  EXPECT_EQ(al.bytes_in_use(), base);
}

// Stream A is held by a host function until released; a block freed behind it must not go
// to stream B, while A itself may take it back at once.
TEST(CudaAllocator, DoesNotHandABlockStillInUseOnOneStreamToAnother) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream a, b;
  std::atomic<bool> release{false};
  // A watchdog releases the stream if an allocation were to wait for the device.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return done; });
    release = true;
  });
  PTDP_CUDA_CHECK(cudaLaunchHostFunc(
      a.s,
      [](void* flag) {
        while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
      },
      &release));
  const size_t n = 7654321;
  void* p = al.allocate(n, a.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(p, 0, n, a.s));  // queued behind the host function
  al.deallocate(p, n);
  void* q = al.allocate(n, b.s);
  EXPECT_NE(q, p) << "a block still in use on stream A was handed to stream B";
  void* p2 = al.allocate(n, a.s);
  EXPECT_EQ(p2, p) << "stream A could not take back its own block";
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  PTDP_CUDA_CHECK(cudaStreamSynchronize(a.s));
  al.deallocate(p2, n);
  al.deallocate(q, n);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(a.s));
  PTDP_CUDA_CHECK(cudaStreamSynchronize(b.s));
  // Now idle: stream B may take either block without a new cudaMalloc.
  const size_t cached = al.bytes_cached();
  void* r = al.allocate(n, b.s);
  EXPECT_TRUE(r == p || r == q);
  EXPECT_EQ(al.bytes_cached(), cached - DeviceAllocator::round_up(n));
  al.deallocate(r, n);
}

}  // namespace
}  // namespace ptdp::cuda
#endif
