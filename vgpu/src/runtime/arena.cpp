// Device memory's address range (arena.h).
#include "runtime/arena.h"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <vector>

namespace vgpu::rt {

ArenaBounds g_arena;

namespace {
constexpr size_t kPage = 4096;
constexpr size_t kReserve = size_t{1} << 40;  // 1 TiB of address space, no memory until used
// Released blocks up to this many bytes keep their pages (PROT_NONE, so a stale pointer still
// faults): a block of the same size handed out again is not faulted and zeroed page by page by
// the kernel once more (each rank's 32 MiB cuBLAS workspace, each test).
constexpr size_t kKeepResident = size_t{512} << 20;

struct Arena {
  std::mutex mu;
  char* base = nullptr;
  size_t used = 0;                               // the bump pointer's offset
  struct Released {
    char* p;
    bool kept;  // its pages are kept (kKeepResident)
  };
  std::map<size_t, std::vector<Released>> free_by_size;  // released ranges by page-rounded size
  size_t resident = 0;                                  // bytes of the kept ones
  bool failed = false;
};

Arena& arena() {
  static Arena* a = new Arena;
  return *a;
}
}  // namespace

char* arena_allocate(size_t bytes) {
  const size_t n = (bytes + kPage - 1) / kPage * kPage;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.base && !a.failed) {
    void* r = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
      a.failed = true;
    } else {
      a.base = static_cast<char*>(r);
      g_arena.lo = reinterpret_cast<uintptr_t>(a.base);
      g_arena.hi = g_arena.lo + kReserve;
    }
  }
  if (!a.base) return nullptr;
  Arena::Released r{nullptr, false};
  auto it = a.free_by_size.find(n);
  if (it != a.free_by_size.end() && !it->second.empty()) {
    r = it->second.back();
    it->second.pop_back();
  } else {
    if (n > kReserve - a.used) return nullptr;
    r.p = a.base + a.used;
    a.used += n;
  }
  if (::mprotect(r.p, n, PROT_READ | PROT_WRITE) != 0) {
    a.free_by_size[n].push_back(r);
    return nullptr;
  }
  if (r.kept) a.resident -= n;
  return r.p;
}

void arena_release(char* p, size_t bytes) {
  const size_t n = (bytes + kPage - 1) / kPage * kPage;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  // The range faults until it is handed out again; its memory stays (up to kKeepResident) or
  // goes back to the system.
  const bool keep = a.resident + n <= kKeepResident;
  if (keep) {
    ::mprotect(p, n, PROT_NONE);
    a.resident += n;
  } else {
    ::mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  a.free_by_size[n].push_back({p, keep});
}

}  // namespace vgpu::rt
