// Device and pinned memory's own address ranges: every cudaMalloc block is placed in one range of
// the address space reserved at start-up and every cudaMallocHost block in the range just above
// it, so that "is this device memory" and "is this device or pinned memory" are one comparison
// each (the host-access checks of instrumented host code, src/kernel/access_hooks.cpp).
//
// Device memory is one memory file mapped kTags times side by side ("views"), as HWASan's
// aliasing mode does: the same bytes are reachable at kTags addresses, and the view a pointer
// points into is its tag. The arena hands out view 0 addresses (the runtime's own, canonical
// ones); cudaMalloc gives its caller the allocation's view (its tag), and a caching allocator's
// block changes view with each user it goes to. A pointer whose tag is not its allocation's came
// from another allocation (an index that ran into a neighbour) or from a former user of the
// memory (a stale pointer). Without the memory file (memfd_create unavailable) there is one view
// and every tag is 0.
//
// Pinned blocks are whole pages, mapped on allocation and inaccessible (PROT_NONE) after release;
// device blocks are whole pages of the memory file, their pages given back (a hole punched) after
// release. Both reuse the offsets of released blocks of the same page count; up to 512 MiB of
// released blocks per range keep their memory for that reuse.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vgpu::rt {

enum class ArenaKind { Device, Pinned };
// Views of device memory: kTags, or kFewerTags where the address space of kTags views and the
// pinned range ((kTags + 1) TiB) cannot be reserved (a limit on it, ulimit -v).
constexpr unsigned kTags = 64, kFewerTags = 16;

// A block of at least `bytes` (page-aligned; for device memory in view 0), or null when the range
// is exhausted or not available.
char* arena_allocate(size_t bytes, ArenaKind kind);
void arena_release(char* p, size_t bytes, ArenaKind kind);

struct ArenaBounds {
  uintptr_t lo = 0, mid = 0, hi = 0;  // device memory [lo, mid), pinned [mid, hi); empty until used
  uintptr_t view = 0;                 // bytes per view of device memory; 0: one view, no tags
  unsigned tags = 1;                  // views of device memory
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
// The view a device pointer points into (0 for any other pointer, and without views).
inline unsigned tag_of(const void* p) {
  if (!g_arena.view || !in_device_arena(p)) return 0;
  return static_cast<unsigned>((reinterpret_cast<uintptr_t>(p) - g_arena.lo) / g_arena.view);
}
// The same byte in view 0 (any other pointer unchanged).
inline char* untag(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (!g_arena.view || !in_device_arena(p)) return reinterpret_cast<char*>(a);
  return reinterpret_cast<char*>(g_arena.lo + (a - g_arena.lo) % g_arena.view);
}
// A view 0 device address in view `tag`.
inline char* with_tag(char* canonical, unsigned tag) { return g_arena.view ? canonical + tag * g_arena.view : canonical; }
// Whether tags can differ (the views exist).
inline bool tags_enabled() { return g_arena.view != 0; }

}  // namespace vgpu::rt
