// The caching device allocator: reuse on a stream, byte counts and peak, release, and that a
// block freed behind unfinished work on one stream is not handed to another stream.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

#ifdef PTDP_VGPU
#include <vgpu/runtime.h>
#include <vgpu/suballoc.h>
#endif

namespace ptdp::cuda {
namespace {

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    cudaStreamSynchronize(s);
    DeviceAllocator::for_device(0).forget_stream(s);
    cudaStreamDestroy(s);
  }
};

// The vgpu build keeps freed blocks in a quarantine before reuse (so that stale pointers meet
// freed memory); the tests of the reuse policy itself turn it off.
#ifdef PTDP_VGPU
struct NoQuarantine {
  NoQuarantine() { vgpu::set_sub_quarantine_bytes_for_testing(0); }
  ~NoQuarantine() { vgpu::set_sub_quarantine_bytes_for_testing(-1); }
};
// The block under a tensor's pointer: in the vgpu build each user of a block gets its memory
// under another tag (another address), so that stale pointers are told apart.
const void* block_of(const void* p) { return vgpu::untagged(p); }

// A tensor of n bytes written, freed, and its block handed to the next tensor at once (the caller
// holds a NoQuarantine): {the stale pointer, the next tensor's}.
std::pair<void*, void*> freed_then_reused(DeviceAllocator& al, size_t n, cudaStream_t s) {
  void* p = al.allocate(n, s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(p, 0, n, s));
  al.deallocate(p, n);
  void* q = al.allocate(n, s);
  EXPECT_EQ(block_of(q), block_of(p)) << "the block was not reused: the test shows nothing";
  return {p, q};
}

// A kernel launched with a pointer the vgpu refuses: it does not run, and its failure is
// asynchronous, as on a GPU: the launch's own error check sees it when the stream has already
// reached it (then fill throws), the synchronisation otherwise.
void fill_that_fails(void* p, size_t n, cudaStream_t s) {
  try {
    fill(p, DType::F32, int64_t(n / 4), 2.0, s);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("unspecified launch failure"), std::string::npos) << e.what();
  }
  EXPECT_NE(cudaStreamSynchronize(s), cudaSuccess);
}
#else
// Nothing to switch off on a real GPU (the constructor keeps the holders' variables in use).
struct NoQuarantine {
  NoQuarantine() {}
};
const void* block_of(const void* p) { return p; }
#endif

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
  NoQuarantine no_quarantine;
  Stream st;
  const size_t n = 1234567;
  void* p = al.allocate(n, st.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(p, 1, n, st.s));
  al.deallocate(p, n);
  void* q = al.allocate(n, st.s);  // no wait needed: the stream orders the two uses
  EXPECT_EQ(block_of(q), block_of(p));
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

// Each stream's own usage and peak (thread ranks sharing a GPU, each backend on its stream): a
// block counts for the stream it was allocated for, also when it is a reused block; a forgotten
// stream's usage goes, and its blocks freed later count against no stream.
TEST(CudaAllocator, CountsEachStreamsBytesAndPeak) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  const size_t a = DeviceAllocator::round_up(size_t(3) << 20), b = DeviceAllocator::round_up(size_t(5) << 20);
  Stream one, two;
  void* pa = al.allocate(a, one.s);
  void* pb = al.allocate(b, two.s);
  void* pc = al.allocate(b, two.s);
  EXPECT_EQ(al.bytes_in_use(one.s), a);
  EXPECT_EQ(al.bytes_in_use(two.s), 2 * b);
  al.deallocate(pc, b);
  EXPECT_EQ(al.bytes_in_use(two.s), b);
  EXPECT_EQ(al.peak_bytes_in_use(two.s), 2 * b);
  EXPECT_EQ(al.peak_bytes_in_use(one.s), a);
  al.reset_peak(two.s);
  EXPECT_EQ(al.peak_bytes_in_use(two.s), b);
  pc = al.allocate(b, two.s);  // its own freed block again: counted again
  EXPECT_EQ(al.bytes_in_use(two.s), 2 * b);
  al.deallocate(pc, b);
  al.deallocate(pa, a);
  EXPECT_EQ(al.bytes_in_use(one.s), 0u);
  EXPECT_EQ(al.peak_bytes_in_use(one.s), a);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(two.s));
  al.forget_stream(two.s);
  EXPECT_EQ(al.bytes_in_use(two.s), 0u);
  EXPECT_EQ(al.peak_bytes_in_use(two.s), 0u);
  const size_t no_stream = al.bytes_in_use(nullptr);
  al.deallocate(pb, b);  // allocated for the forgotten stream: no stream's usage changes
  EXPECT_EQ(al.bytes_in_use(one.s), 0u);
  EXPECT_EQ(al.bytes_in_use(nullptr), no_stream);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(one.s));
  al.release_cached();
}

// Stream A is held by a host function until released; a block freed behind it must not go
// to stream B, while A itself may take it back at once.
TEST(CudaAllocator, DoesNotHandABlockStillInUseOnOneStreamToAnother) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  NoQuarantine no_quarantine;
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
  EXPECT_NE(block_of(q), block_of(p)) << "a block still in use on stream A was handed to stream B";
  void* p2 = al.allocate(n, a.s);
  EXPECT_EQ(block_of(p2), block_of(p)) << "stream A could not take back its own block";
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
  EXPECT_TRUE(block_of(r) == block_of(p) || block_of(r) == block_of(q));
  EXPECT_EQ(al.bytes_cached(), cached - DeviceAllocator::round_up(n));
  al.deallocate(r, n);
}

#ifdef PTDP_VGPU
// Planted bugs that the caching allocator hid from the vgpu before it declared each tensor's
// extent and lifetime (vgpu/suballoc.h): each is reported now.

std::string joined(const std::vector<std::string>& m) {
  std::string s;
  for (const std::string& x : m) s += x + "\n";
  return s;
}
bool has(const std::vector<std::string>& m, const std::string& needle) { return joined(m).find(needle) != std::string::npos; }

// A kernel writing one element more than the tensor holds: the block is rounded up to 1024
// bytes, so before, the write landed in padding nobody checked.
TEST(CudaAllocator, AKernelOverrunIntoTheRoundingPaddingIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream st;
  const int64_t n = 250;  // 1000 bytes of f32, a 1024-byte block
  ASSERT_GT(DeviceAllocator::round_up(n * 4), size_t(n * 4));
  void* p = al.allocate(n * 4, st.s);
  vgpu::CaptureViolations capture;
  fill(p, DType::F32, n + 1, 1.0, st.s);  // planted: one element too many
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st.s));
  const auto m = capture.messages();
  EXPECT_TRUE(has(m, "out of bounds: memory past the end of allocation #")) << joined(m);
  EXPECT_TRUE(has(m, "(1000 bytes of device memory on device 0, handed out by a caching allocator")) << joined(m);
  EXPECT_TRUE(has(m, "bytes 0 to 3 after its last byte changed")) << joined(m);
  al.deallocate(p, n * 4);
}

TEST(CudaAllocator, ACopyPastTheTensorIntoThePaddingIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream st;
  void* p = al.allocate(1000, st.s);
  std::vector<char> host(1008, 0);
  vgpu::CaptureViolations capture;
  EXPECT_EQ(cudaMemcpyAsync(p, host.data(), 1008, cudaMemcpyHostToDevice, st.s), cudaErrorInvalidValue);
  cudaGetLastError();
  const auto m = capture.messages();
  EXPECT_TRUE(has(m, "overrunning its end by 8 byte(s)")) << joined(m);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st.s));
  al.deallocate(p, 1000);
}

// A pointer kept after its tensor was freed: used before the block is handed out again, and
// after another tensor of the same size was allocated (the quarantine keeps the block from it).
TEST(CudaAllocator, UseAfterFreeIsReportedEvenAfterTheNextAllocationOfTheSameSize) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream st;
  const size_t n = 4096;
  void* p = al.allocate(n, st.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(p, 0, n, st.s));
  al.deallocate(p, n);
  void* q = al.allocate(n, st.s);
  EXPECT_NE(q, p) << "the freed block was handed out at once: no quarantine";
  vgpu::CaptureViolations capture;
  EXPECT_EQ(cudaMemsetAsync(p, 0, 16, st.s), cudaErrorInvalidValue);  // planted: the stale pointer
  cudaGetLastError();
  fill_that_fails(p, n, st.s);  // the same in a kernel
  const auto m = capture.messages();
  EXPECT_TRUE(has(m, "use after free: kernel fill_kernel")) << joined(m);
  EXPECT_TRUE(has(m, "use after free: cudaMemsetAsync target uses 16 bytes at offset 0 of allocation #")) << joined(m);
  EXPECT_TRUE(has(m, "given back to its caching allocator")) << joined(m);
  EXPECT_TRUE(has(m, "freed by: tensor free (caching allocator)")) << joined(m);
  // The failed launch corrupts the (virtual) device, as on a GPU: clear it for the next tests.
  vgpu::reset_device_for_testing(0);
  cudaGetLastError();
  al.deallocate(q, n);
}

// A pointer kept after its tensor was freed, used once the block went to the next tensor (no
// quarantine: at once): the memory is live and written, but the pointer carries the former
// tensor's tag (vgpu/README.md, "Pointer tags").
TEST(CudaAllocator, AStalePointerIsReportedAfterItsBlockWentToTheNextTensor) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  NoQuarantine no_quarantine;
  Stream st;
  const size_t n = 3072;
  const auto [p, q] = freed_then_reused(al, n, st.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(q, 0, n, st.s));
  vgpu::CaptureViolations capture;
  EXPECT_EQ(cudaMemsetAsync(p, 1, 16, st.s), cudaErrorInvalidValue);  // planted: the stale pointer
  cudaGetLastError();
  fill_that_fails(p, n, st.s);  // and in a kernel
  const auto m = capture.messages();
  EXPECT_TRUE(has(m, "use after free: cudaMemsetAsync target uses 16 bytes at ")) << joined(m);
  EXPECT_TRUE(has(m, "use after free: kernel fill_kernel")) << joined(m);
  EXPECT_TRUE(has(m, "it is a stale pointer of allocation #")) << joined(m);
  EXPECT_TRUE(has(m, "which now belongs to allocation #")) << joined(m);
  vgpu::reset_device_for_testing(0);
  cudaGetLastError();
  std::vector<float> host(n / 4);
  PTDP_CUDA_CHECK(cudaMemcpy(host.data(), q, n, cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[0], 0.0f) << "the stale writes did not reach the next tensor";
  al.deallocate(q, n);
}

// The next tensor in a recycled block reads it before writing it: its bytes are uninitialised
// (and poisoned), not the previous tensor's values.
TEST(CudaAllocator, AReadOfARecycledBlocksStaleContentsIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  NoQuarantine no_quarantine;
  Stream st;
  const size_t n = 2048;
  void* q = freed_then_reused(al, n, st.s).second;
  std::vector<float> host(n / 4);
  vgpu::CaptureViolations capture;
  PTDP_CUDA_CHECK(cudaMemcpyAsync(host.data(), q, n, cudaMemcpyDeviceToHost, st.s));  // planted: never written
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st.s));
  const auto m = capture.messages();
  EXPECT_TRUE(has(m, "uninitialized read: cudaMemcpyAsync source reads bytes [0, 2048) of allocation #")) << joined(m);
  EXPECT_TRUE(std::isnan(host[0])) << "a recycled block is poisoned (0xFF: NaN), not the old zeros";
  al.deallocate(q, n);
}

// A tensor of one stream read by another and freed without waiting for it: the allocator hands
// the block back to the first stream at once, while the other may still read it. The free is a
// write of the block in the first stream's order, which the race checker orders against the read.
TEST(CudaAllocator, FreeingATensorAnotherStreamStillReadsIsARace) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  DeviceAllocator& al = DeviceAllocator::for_device(0);
  Stream a, b;
  const size_t n = 8192;
  void* x = al.allocate(n, a.s);
  void* y = al.allocate(n, b.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(x, 0, n, a.s));
  cudaEvent_t e;
  PTDP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  PTDP_CUDA_CHECK(cudaEventRecord(e, a.s));
  PTDP_CUDA_CHECK(cudaStreamWaitEvent(b.s, e, 0));
  PTDP_CUDA_CHECK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice, b.s));
  {
    vgpu::CaptureViolations capture;
    al.deallocate(x, n);  // planted: stream a never waited for b's read
    PTDP_CUDA_CHECK(cudaStreamSynchronize(a.s));
    PTDP_CUDA_CHECK(cudaStreamSynchronize(b.s));
    const auto m = capture.messages();
    EXPECT_TRUE(has(m, "race: tensor free (caching allocator) on stream #")) << joined(m);
    EXPECT_TRUE(has(m, "which cudaMemcpyAsync on stream #")) << joined(m);
  }
  // Ordered (b's read recorded and waited for before the free): no report.
  x = al.allocate(n, a.s);
  PTDP_CUDA_CHECK(cudaMemsetAsync(x, 0, n, a.s));
  PTDP_CUDA_CHECK(cudaEventRecord(e, a.s));
  PTDP_CUDA_CHECK(cudaStreamWaitEvent(b.s, e, 0));
  PTDP_CUDA_CHECK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice, b.s));
  PTDP_CUDA_CHECK(cudaEventRecord(e, b.s));
  PTDP_CUDA_CHECK(cudaStreamWaitEvent(a.s, e, 0));
  vgpu::CaptureViolations capture;
  al.deallocate(x, n);
  al.deallocate(y, n);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(a.s));
  PTDP_CUDA_CHECK(cudaStreamSynchronize(b.s));
  EXPECT_TRUE(capture.messages().empty()) << joined(capture.messages());
  PTDP_CUDA_CHECK(cudaEventDestroy(e));
}
#endif

}  // namespace
}  // namespace ptdp::cuda
#endif
