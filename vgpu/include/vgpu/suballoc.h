// vgpu: sub-allocations, for caching allocators built on cudaMalloc. Such an allocator keeps the
// blocks its users free and hands them to later users, often larger than they asked for, so the
// vgpu's checks on the cudaMalloc block (guard zones, poison, use after free, the initialisation
// shadow, the race checker) would see neither a user's real extent nor its lifetime. An allocator
// built for the vgpu (ptdp's DeviceAllocator under PTDP_VGPU) declares both here; then each user's
// memory is checked as if it had its own cudaMalloc. Product code includes this header only under
// PTDP_VGPU.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace vgpu {

// `block` (a pointer cudaMalloc returned, on the block's device) now belongs to a user who asked
// for `bytes` (at most the cudaMalloc size; 0 allowed), for work on `stream`. At once, in the
// host's order: operands, kernel arguments and pointers beyond `bytes` are out of bounds, and the
// site of this call (a backtrace) names the allocation in reports. In stream order (a write of the
// whole block queued on `stream`; with a null stream, done now by the host, for a block the caller
// knows idle): a block freed by an earlier user must still hold its freed poison (else: use after
// free, a write through a stale pointer), the user's bytes are poisoned (0xFF, as cudaMalloc's)
// and marked uninitialised, and the rest of the block becomes a guard zone. As a write, it is
// reported by the race checker against any use of the block by another stream not ordered before
// it (a block handed to a stream while another may still use it). Handing out a block that a user
// still holds is reported ("invalid allocation").
// Returns the pointer the user gets: `block` the first time, then the same memory under a new tag
// (another address of it, vgpu/README.md, "Pointer tags") each time the block goes to a new user,
// so that a pointer a former user kept is told apart from the new user's. The allocator keeps the
// returned pointer: sub_free and cudaFree take it.
[[nodiscard]] void* sub_allocate(void* block, size_t bytes, cudaStream_t stream);

// The user of `block` (the pointer sub_allocate returned) gave it back (queued on `stream` as a write of the whole block; null: done
// now by the host). In the host's order: any later use of the memory (copy, memset, kernel
// argument, GEMM or collective operand) is reported as use after free until the next
// sub_allocate. In stream order: the guard zone after the user's bytes is checked (an overrun into
// the block's padding), the block is poisoned with 0xDD and marked uninitialised. Giving back a
// block twice is reported ("invalid free").
void sub_free(void* block, cudaStream_t stream);

// The memory under p (any user's pointer into a block, stale ones included) named the same way
// whatever its tag: for tests that a block went to its next user.
const void* untagged(const void* p);

// How many bytes of freed blocks a caching allocator should keep from reuse (its quarantine), so
// that a stale pointer still points at freed memory when it is used: VGPU_SUBALLOC_QUARANTINE_MB
// (default 64) per allocator.
size_t sub_quarantine_bytes();
// Test-only: overrides it (bytes >= 0), or goes back to the environment (bytes < 0).
void set_sub_quarantine_bytes_for_testing(long long bytes);

}  // namespace vgpu
