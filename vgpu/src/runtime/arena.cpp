// Device and pinned memory's address ranges (arena.h).
#include "runtime/arena.h"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <vector>

namespace vgpu::rt {

ArenaBounds g_arena;

namespace {
constexpr size_t kPage = 4096;
constexpr size_t kReserve = size_t{1} << 40;  // 1 TiB of address space per range, no memory until used
// Released blocks up to this many bytes keep their pages (PROT_NONE, so a stale pointer still
// faults): a block of the same size handed out again is not faulted and zeroed page by page by
// the kernel once more (each rank's 32 MiB cuBLAS workspace, each test).
constexpr size_t kKeepResident = size_t{512} << 20;

struct Range {
  char* base = nullptr;
  size_t used = 0;  // the bump pointer's offset
  struct Released {
    char* p;
    bool kept;  // its pages are kept (kKeepResident)
  };
  std::map<size_t, std::vector<Released>> free_by_size;  // released ranges by page-rounded size
  size_t resident = 0;                                  // bytes of the kept ones
};

struct Arena {
  std::mutex mu;
  bool reserved = false, failed = false;
  Range ranges[2];  // ArenaKind::Device, ArenaKind::Pinned
};

Arena& arena() {
  static Arena* a = new Arena;
  return *a;
}
}  // namespace

char* arena_allocate(size_t bytes, ArenaKind kind) {
  const size_t n = (bytes + kPage - 1) / kPage * kPage;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.reserved && !a.failed) {
    void* r = ::mmap(nullptr, 2 * kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
      a.failed = true;
    } else {
      a.reserved = true;
      a.ranges[0].base = static_cast<char*>(r);
      a.ranges[1].base = a.ranges[0].base + kReserve;
      g_arena.lo = reinterpret_cast<uintptr_t>(r);
      g_arena.mid = g_arena.lo + kReserve;
      g_arena.hi = g_arena.mid + kReserve;
    }
  }
  if (!a.reserved) return nullptr;
  Range& g = a.ranges[kind == ArenaKind::Device ? 0 : 1];
  Range::Released r{nullptr, false};
  auto it = g.free_by_size.find(n);
  if (it != g.free_by_size.end() && !it->second.empty()) {
    r = it->second.back();
    it->second.pop_back();
  } else {
    if (n > kReserve - g.used) return nullptr;
    r.p = g.base + g.used;
    g.used += n;
  }
  if (::mprotect(r.p, n, PROT_READ | PROT_WRITE) != 0) {
    g.free_by_size[n].push_back(r);
    return nullptr;
  }
  if (r.kept) g.resident -= n;
  return r.p;
}

void arena_release(char* p, size_t bytes, ArenaKind kind) {
  const size_t n = (bytes + kPage - 1) / kPage * kPage;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  Range& g = a.ranges[kind == ArenaKind::Device ? 0 : 1];
  // The range faults until it is handed out again; its memory stays (up to kKeepResident) or
  // goes back to the system.
  const bool keep = g.resident + n <= kKeepResident;
  if (keep) {
    ::mprotect(p, n, PROT_NONE);
    g.resident += n;
  } else {
    ::mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  g.free_by_size[n].push_back({p, keep});
}

}  // namespace vgpu::rt
