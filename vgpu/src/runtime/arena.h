// Device memory's own address range: every cudaMalloc block is placed in one range of the address
// space reserved at start-up, so that "is this device memory" is one comparison (the host-access
// check of instrumented host code, src/kernel/access_hooks.cpp). Blocks are whole pages, mapped on
// allocation and inaccessible (PROT_NONE) after release, their ranges reused by later blocks of the
// same page count; up to 512 MiB of released blocks keep their memory for that reuse.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vgpu::rt {

// A block of at least `bytes` (page-aligned), or null when the range is exhausted or not available.
char* arena_allocate(size_t bytes);
void arena_release(char* p, size_t bytes);

struct ArenaBounds {
  uintptr_t lo = 0, hi = 0;  // [lo, hi): empty until the first allocation
};
extern ArenaBounds g_arena;
inline bool in_device_arena(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a - g_arena.lo < g_arena.hi - g_arena.lo;
}

}  // namespace vgpu::rt
