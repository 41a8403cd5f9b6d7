// Device memory: alignment, poison, guard zones, use after free, invalid frees, the registry
// and the initialisation shadow.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <vgpu/suballoc.h>

#include "runtime/arena.h"
#include "runtime/test_util.h"

namespace {
using vgpu_test::any_contains;

TEST(RuntimeMemory, AllocationsAreAlignedPoisonedAndRegistered) {
  unsigned char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 256, 0u);
  {
    vgpu::HostTouchesDeviceMemory on_purpose;  // looks at the poison: cudaMalloc does not initialise
    EXPECT_EQ(d[0], 0xFF);
    EXPECT_EQ(d[999], 0xFF);
  }
  auto info = vgpu::find_allocation(d + 500);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->base, reinterpret_cast<char*>(d));
  EXPECT_EQ(info->bytes, 1000u);
  EXPECT_EQ(info->device, 0);
  EXPECT_FALSE(vgpu::find_allocation(d + 1000).has_value());
  void* h;
  ASSERT_EQ(cudaMallocHost(&h, 100), cudaSuccess);
  auto hinfo = vgpu::find_allocation(h);
  ASSERT_TRUE(hinfo.has_value());
  EXPECT_EQ(hinfo->device, -1);
  EXPECT_NE(hinfo->id, info->id);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
}

TEST(RuntimeMemory, CheckRangeAcceptsInsideAndReportsOutside) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 128), cudaSuccess);
  void* h;
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  vgpu::CaptureViolations cap;
  EXPECT_TRUE(vgpu::check_range(d, 128, "test operand"));
  EXPECT_TRUE(vgpu::check_range(d + 100, 28, "test operand"));
  EXPECT_FALSE(vgpu::check_range(d + 100, 29, "test operand"));
  EXPECT_FALSE(vgpu::check_range(d + 130, 4, "test operand"));
  EXPECT_FALSE(vgpu::check_range(h, 4, "test operand"));  // pinned memory is not device memory
  EXPECT_TRUE(vgpu::check_range(h, 4, "test operand", /*allow_pinned=*/true));
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(any_contains(m, "overrunning its end by 1 byte(s)"));
  EXPECT_TRUE(any_contains(m, "starts 2 byte(s) past the end of allocation"));
  EXPECT_TRUE(any_contains(m, "needs device memory but got pinned host memory"));
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeMemory, HostWritePastTheEndIsCaughtAtFree) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 100), cudaSuccess);
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;  // the host stands in for device code
    d[100] = 1;  // one byte past the end, through the pointer on the host
  }
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  ASSERT_EQ(cap.messages().size(), 1u);
  EXPECT_TRUE(any_contains(cap.messages(), "out of bounds: memory past the end of allocation"));
  EXPECT_TRUE(any_contains(cap.messages(), "bytes 0 to 0 after its last byte"));
}

TEST(RuntimeMemory, WriteBeforeTheStartIsCaughtAtSynchronize) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64), cudaSuccess);
  vgpu::CaptureViolations cap;
  {
    vgpu::HostTouchesDeviceMemory on_purpose;  // the host stands in for device code
    d[-3] = 0;
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cap.messages().size(), 1u);
  EXPECT_TRUE(any_contains(cap.messages(), "memory before the start of allocation"));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cap.messages().size(), 1u);  // repaired once reported
}

TEST(RuntimeMemory, UseAfterFreeIsReportedWithTheFreeSite) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  char host[64];
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaMemcpy(host, d, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_FALSE(vgpu::check_range(d + 8, 8, "kernel argument"));
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(any_contains(m, "use after free: cudaMemcpy source uses 64 bytes at offset 0"));
  EXPECT_TRUE(any_contains(m, "freed by: cudaFree"));
  cudaGetLastError();
}

// Allocations take the 63 tags of the views in turn (arena.h): two allocations far apart share
// one a time in 63, not 15.
TEST(RuntimeMemory, AllocationsTakeSixtyThreeTagsInTurn) {
  std::vector<void*> blocks(200);
  std::set<unsigned> tags;
  for (void*& b : blocks) {
    ASSERT_EQ(cudaMalloc(&b, 100), cudaSuccess);
    tags.insert(vgpu::rt::tag_of(b));
  }
  EXPECT_EQ(vgpu::rt::g_arena.tags, vgpu::rt::kTags) << "the address space for 64 views was refused here";
  for (void* b : blocks) ASSERT_EQ(cudaFree(b), cudaSuccess);
  EXPECT_EQ(tags.size(), 63u);
  EXPECT_EQ(tags.count(0), 0u);  // view 0 is the runtime's own
}

// A pointer kept after cudaFree, used once the quarantine let the memory go and a later
// cudaMalloc took the same address: live, written memory, but the pointer carries the freed
// allocation's tag (arena.h).
TEST(RuntimeMemory, AStalePointerIsReportedAfterItsMemoryWentToALaterAllocation) {
  constexpr size_t kBytes = 40000;  // a page count no filler below has
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, kBytes), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  std::vector<void*> fillers(1100);  // more frees than the quarantine holds: d leaves it
  for (void*& f : fillers) ASSERT_EQ(cudaMalloc(&f, 64), cudaSuccess);
  for (void* f : fillers) ASSERT_EQ(cudaFree(f), cudaSuccess);
  char* e;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&e), kBytes), cudaSuccess);
  ASSERT_EQ(vgpu::untagged(e), vgpu::untagged(d)) << "the memory was not reused: the test shows nothing";
  ASSERT_NE(e, d);
  ASSERT_EQ(cudaMemset(e, 1, kBytes), cudaSuccess);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaMemset(d, 2, 64), cudaErrorInvalidValue);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << vgpu_test::joined(m);
  EXPECT_TRUE(any_contains(m, "use after free: cudaMemset target uses 64 bytes at ")) << vgpu_test::joined(m);
  EXPECT_TRUE(any_contains(m, "it is a stale pointer of allocation #")) << vgpu_test::joined(m);
  EXPECT_TRUE(any_contains(m, "freed by: cudaFree")) << vgpu_test::joined(m);
  unsigned char first = 0;
  ASSERT_EQ(cudaMemcpy(&first, e, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(cudaFree(e), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeMemory, InvalidAndDoubleFreesAreInvalidValue) {
  int local = 0;
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64), cudaSuccess);
  void* h;
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(cudaFree(&local), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(h), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(d), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 5u);
  EXPECT_TRUE(any_contains(m, "got a pointer that no cudaMalloc returned"));
  EXPECT_TRUE(any_contains(m, "1 bytes inside allocation"));
  EXPECT_TRUE(any_contains(m, "pinned host memory is freed with cudaFreeHost"));
  EXPECT_TRUE(any_contains(m, "device memory is freed with cudaFree"));
  EXPECT_TRUE(any_contains(m, "(double free)"));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST(RuntimeMemory, InitialisationShadowIsPerByte) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 300), cudaSuccess);
  vgpu::mark_initialized(d + 1, 130);
  vgpu::CaptureViolations cap;
  vgpu::check_initialized(d + 1, 130, "test read");
  EXPECT_TRUE(cap.messages().empty());
  vgpu::check_initialized(d, 2, "test read");
  vgpu::check_initialized(d + 100, 32, "test read");
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(any_contains(m, "1 of them (the first at offset 0)"));
  EXPECT_TRUE(any_contains(m, "1 of them (the first at offset 131)"));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(RuntimeMemory, ZeroBytesAllocatesNothing) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMalloc(nullptr, 4), cudaErrorInvalidValue);
  cudaGetLastError();
}

}  // namespace
