// Device and pinned memory's own address ranges: every cudaMalloc block is placed in one range of
// the address space reserved at start-up and every cudaMallocHost block in the range just above
// it, so that "is this device memory" and "is this device or pinned memory" are one comparison
// each (the host-access checks of instrumented host code, src/kernel/access_hooks.cpp). Blocks
// are whole pages, mapped on allocation and inaccessible (PROT_NONE) after release, their ranges
// reused by later blocks of the same page count; up to 512 MiB of released blocks per range keep
// their memory for that reuse.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vgpu::rt {

enum class ArenaKind { Device, Pinned };

// A block of at least `bytes` (page-aligned), or null when the range is exhausted or not available.
char* arena_allocate(size_t bytes, ArenaKind kind);
void arena_release(char* p, size_t bytes, ArenaKind kind);

struct ArenaBounds {
  uintptr_t lo = 0, mid = 0, hi = 0;  // device memory [lo, mid), pinned [mid, hi); empty until used
};
extern ArenaBounds g_arena;
inline bool in_device_arena(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a - g_arena.lo < g_arena.mid - g_arena.lo;
}
// Device or pinned memory.
inline bool in_arenas(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a - g_arena.lo < g_arena.hi - g_arena.lo;
}

}  // namespace vgpu::rt
