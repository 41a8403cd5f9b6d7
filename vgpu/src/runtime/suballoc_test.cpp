// Sub-allocations (vgpu/suballoc.h): a caching allocator's block handed to successive users is
// checked with each user's exact extent and lifetime. Planted bugs of the classes a caching
// allocator hides: an overrun into the block's padding, use after free, a write through a stale
// pointer, a read of a recycled block's stale contents, reuse racing with another stream, and
// the allocator's own misuse (one block given to two users, a double free).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>
#include <vgpu/suballoc.h>

#include "runtime/test_util.h"

namespace {
using vgpu_test::any_contains;
using vgpu_test::joined;

struct Block {
  char* p = nullptr;
  cudaStream_t s = nullptr;
  explicit Block(size_t bytes) {
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc(reinterpret_cast<void**>(&p), bytes);
  }
  ~Block() {
    cudaStreamSynchronize(s);
    cudaFree(p);
    cudaStreamDestroy(s);
    cudaGetLastError();  // the planted faults' errors must not reach the next test
  }
};

TEST(RuntimeSubAlloc, OperandsAreCheckedAgainstTheUsersExtentNotTheBlock) {
  Block b(1024);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1000, b.s));
  auto info = vgpu::find_allocation(b.p);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->bytes, 1000u);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaMemsetAsync(b.p, 0, 1000, b.s), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(b.p, 0, 1004, b.s), cudaErrorInvalidValue);  // 4 bytes into the padding
  EXPECT_EQ(cudaMemsetAsync(b.p + 1002, 0, 2, b.s), cudaErrorInvalidValue);  // inside the padding
  EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, "out of bounds: cudaMemsetAsync target uses bytes [0, 1004) of allocation #"));
  EXPECT_TRUE(any_contains(m, "overrunning its end by 4 byte(s)"));
  EXPECT_TRUE(any_contains(m, "handed out by a caching allocator from cudaMalloc block #"));
  EXPECT_TRUE(any_contains(m, "starts 2 byte(s) past the end of allocation #"));
  vgpu::sub_free(b.p, b.s);
}

// A write into the padding by device code (here through the pointer on the host, as a kernel's
// store would be) is caught by the guard zone that the padding became.
TEST(RuntimeSubAlloc, AWriteIntoThePaddingIsCaughtAtTheFree) {
  Block b(1024);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1000, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 0, 1000, b.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;
    b.p[1001] = 7;
  }
  vgpu::sub_free(b.p, b.s);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "out of bounds: memory past the end of allocation #"));
  EXPECT_TRUE(any_contains(m, "bytes 1 to 1 after its last byte changed"));
  EXPECT_TRUE(any_contains(m, "the size its caching allocator was asked for"));
}

TEST(RuntimeSubAlloc, UseAfterTheFreeIsReportedWithBothSites) {
  Block b(4096);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 4096, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 1, 4096, b.s), cudaSuccess);
  vgpu::sub_free(b.p, b.s);
  vgpu::CaptureViolations cap;
  std::vector<char> host(16);
  EXPECT_EQ(cudaMemcpy(host.data(), b.p + 16, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "use after free: cudaMemcpy source uses 16 bytes at offset 16 of allocation #"));
  EXPECT_TRUE(any_contains(m, "given back to its caching allocator"));
  EXPECT_TRUE(any_contains(m, "allocated by: tensor allocation (caching allocator)"));
  EXPECT_TRUE(any_contains(m, "freed by: tensor free (caching allocator)"));
}

TEST(RuntimeSubAlloc, AWriteThroughAStalePointerIsCaughtWhenTheBlockIsHandedOutAgain) {
  Block b(512);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 512, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 1, 512, b.s), cudaSuccess);
  vgpu::sub_free(b.p, b.s);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;  // the host stands in for device code
    EXPECT_EQ(static_cast<unsigned char>(b.p[0]), 0xDD);  // poisoned
    b.p[100] = 0;  // a stale pointer's store
  }
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 256, b.s));
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "use after free: byte 100 of allocation #"));
  EXPECT_TRUE(any_contains(m, "a write through a stale pointer to a freed tensor"));
  vgpu::sub_free(b.p, b.s);
}

// A pointer the first user kept, used after the block went to the second user (a caching
// allocator without a quarantine hands it out at once): the memory is live and belongs to the
// second user, but the pointer carries the first user's tag.
TEST(RuntimeSubAlloc, AStalePointerIsReportedAfterTheBlockWentToTheNextUser) {
  Block b(2048);
  char* first = static_cast<char*>(vgpu::sub_allocate(b.p, 2048, b.s));
  ASSERT_EQ(cudaMemsetAsync(first, 1, 2048, b.s), cudaSuccess);
  vgpu::sub_free(first, b.s);
  b.p = static_cast<char*>(vgpu::sub_allocate(first, 2048, b.s));
  ASSERT_NE(b.p, first);
  ASSERT_EQ(vgpu::untagged(b.p), vgpu::untagged(first));
  ASSERT_EQ(cudaMemsetAsync(b.p, 2, 2048, b.s), cudaSuccess);
  vgpu::CaptureViolations cap;
  std::vector<char> host(16);
  EXPECT_EQ(cudaMemcpy(host.data(), first + 16, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  vgpu::sub_free(first, b.s);  // the allocator taking it back through the stale pointer
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, "use after free: cudaMemcpy source uses 16 bytes at ")) << joined(m);
  EXPECT_TRUE(any_contains(m, "it is a stale pointer of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "an earlier user of this memory, which now belongs to allocation #"))
      << joined(m);
  EXPECT_TRUE(any_contains(m, "invalid free: a caching allocator took back allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "through another pointer than the one it handed out")) << joined(m);
  // The second user's pointer is fine.
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), b.p + 16, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 2);
  EXPECT_EQ(cap.messages().size(), 2u) << joined(cap.messages());
  vgpu::sub_free(b.p, b.s);
}

// The second user of a block reads it before writing: its bytes are uninitialised again (and
// poisoned, not the first user's values).
TEST(RuntimeSubAlloc, ARecycledBlockIsUninitialisedForItsNextUser) {
  Block b(1024);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1024, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 0, 1024, b.s), cudaSuccess);
  vgpu::sub_free(b.p, b.s);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1024, b.s));
  vgpu::CaptureViolations cap;
  std::vector<unsigned char> host(1024);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), b.p, 1024, cudaMemcpyDeviceToHost, b.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  EXPECT_EQ(host[0], 0xFF);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "uninitialized read: cudaMemcpyAsync source reads bytes [0, 1024) of allocation #"));
  EXPECT_TRUE(any_contains(m, "1024 of them (the first at offset 0)"));
  vgpu::sub_free(b.p, b.s);
}

// A tensor of stream A read by stream B and freed on A without A waiting for B: on a GPU the
// allocator may hand the block to A's next tensor while B still reads it.
TEST(RuntimeSubAlloc, AFreeNotOrderedAfterAnotherStreamsReadIsARace) {
  Block b(4096);
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  char* dst;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dst), 4096), cudaSuccess);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 4096, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 1, 4096, b.s), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, b.s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst, b.p, 4096, cudaMemcpyDeviceToDevice, other), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    vgpu::sub_free(b.p, b.s);  // planted: no event from `other` waited for
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // (The copy may also run after the poison: then it reads uninitialised memory, reported too.)
    const auto m = cap.messages();
    ASSERT_FALSE(m.empty());
    EXPECT_TRUE(any_contains(m, "race: tensor free (caching allocator) on stream #"));
    EXPECT_TRUE(any_contains(m, "which cudaMemcpyAsync on stream #"));
  }
  // The same, ordered: no report.
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 4096, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 1, 4096, b.s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, b.s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst, b.p, 4096, cudaMemcpyDeviceToDevice, other), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, other), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess);
  vgpu::CaptureViolations cap;
  vgpu::sub_free(b.p, b.s);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
  cudaEventDestroy(e);
  cudaFree(dst);
  cudaStreamDestroy(other);
}

// A block handed to stream B while stream A's work on it is still queued (an allocator that
// does not wait for the free's event): B's poison races with A's use.
TEST(RuntimeSubAlloc, HandingABlockToAnotherStreamBeforeTheFirstIsDoneIsARace) {
  Block b(4096);
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 4096, b.s));
  ASSERT_EQ(cudaMemsetAsync(b.p, 1, 4096, b.s), cudaSuccess);
  vgpu::sub_free(b.p, b.s);
  vgpu::CaptureViolations cap;
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 4096, other));  // planted: no wait for b.s
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(any_contains(cap.messages(), "race: tensor allocation (caching allocator) on stream #"));
  vgpu::sub_free(b.p, other);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStreamDestroy(other);
}

TEST(RuntimeSubAlloc, TheAllocatorsOwnMisuseIsReported) {
  Block b(1024);
  vgpu::CaptureViolations cap;
  (void)vgpu::sub_allocate(b.p, 100, b.s);
  (void)vgpu::sub_allocate(b.p, 100, b.s);  // one block to two users
  (void)vgpu::sub_allocate(b.p + 256, 100, b.s);
  vgpu::sub_free(b.p, b.s);
  vgpu::sub_free(b.p, b.s);  // double free
  (void)vgpu::sub_allocate(b.p, 2048, b.s);  // larger than the block
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 4u) << joined(m);
  EXPECT_TRUE(any_contains(m, "invalid allocation: a caching allocator handed out allocation #"));
  EXPECT_TRUE(any_contains(m, "again while its user still holds it"));
  EXPECT_TRUE(any_contains(m, "which is not a live cudaMalloc block"));
  EXPECT_TRUE(any_contains(m, "invalid free: a caching allocator took back"));
  EXPECT_TRUE(any_contains(m, "which is smaller"));
}

// cudaFree of a cached block checks its freed poison and frees the whole block; a block still
// held by a user is reported.
TEST(RuntimeSubAlloc, CudaFreeOfACachedBlockChecksItsPoison) {
  char* p;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 2048), cudaSuccess);
  p = static_cast<char*>(vgpu::sub_allocate(p, 1500, s));
  vgpu::sub_free(p, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;  // the host stands in for device code
    p[2000] = 1;  // in the old padding, after the free
  }
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cap.messages().size(), 1u);
  EXPECT_TRUE(any_contains(cap.messages(), "use after free: byte 2000 of allocation #"));
  char* q;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&q), 512), cudaSuccess);
  q = static_cast<char*>(vgpu::sub_allocate(q, 512, s));
  EXPECT_EQ(cudaFree(q), cudaSuccess);
  ASSERT_EQ(cap.messages().size(), 2u);
  EXPECT_TRUE(any_contains(cap.messages(), "which its caching allocator handed out and was not given back"));
  cudaStreamDestroy(s);
}

// Without a stream (a block the caller knows idle) the poison is the host's write: a stream
// still using the block unordered is a race.
TEST(RuntimeSubAlloc, WithoutAStreamThePoisonIsAHostWrite) {
  Block b(1024);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1024, nullptr));
  {
    vgpu_test::Gate gate;
    gate.block(b.s);
    ASSERT_EQ(cudaMemsetAsync(b.p, 3, 1024, b.s), cudaSuccess);
    vgpu::CaptureViolations cap;
    vgpu::sub_free(b.p, nullptr);  // planted: b.s not synchronised
    EXPECT_TRUE(any_contains(cap.messages(), "race: tensor free (caching allocator) on the host writes"));
    gate.release();
    ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
    b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1024, nullptr));  // the memset overwrote the poison after the free
    EXPECT_TRUE(any_contains(cap.messages(), "use after free: byte 0 of allocation #"));
    vgpu::sub_free(b.p, nullptr);
  }
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 1024, nullptr));
  ASSERT_EQ(cudaMemsetAsync(b.p, 3, 1024, b.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  vgpu::CaptureViolations cap;
  vgpu::sub_free(b.p, nullptr);
  EXPECT_TRUE(cap.messages().empty()) << cap.messages()[0];
}

TEST(RuntimeSubAlloc, AnEmptySubAllocationIsAValidPointer) {
  Block b(512);
  b.p = static_cast<char*>(vgpu::sub_allocate(b.p, 0, b.s));
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaMemsetAsync(b.p, 0, 0, b.s), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(b.p, 0, 1, b.s), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  EXPECT_EQ(cap.messages().size(), 1u);
  vgpu::sub_free(b.p, b.s);
}

}  // namespace
