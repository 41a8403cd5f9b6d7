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

struct Arena {
  std::mutex mu;
  char* base = nullptr;
  size_t used = 0;                               // the bump pointer's offset
  std::map<size_t, std::vector<char*>> free_by_size;  // released ranges by page-rounded size
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
  char* p = nullptr;
  auto it = a.free_by_size.find(n);
  if (it != a.free_by_size.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    if (n > kReserve - a.used) return nullptr;
    p = a.base + a.used;
    a.used += n;
  }
  if (::mprotect(p, n, PROT_READ | PROT_WRITE) != 0) {
    a.free_by_size[n].push_back(p);
    return nullptr;
  }
  return p;
}

void arena_release(char* p, size_t bytes) {
  const size_t n = (bytes + kPage - 1) / kPage * kPage;
  // The memory goes back to the system, and the range faults until it is handed out again.
  ::mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  a.free_by_size[n].push_back(p);
}

}  // namespace vgpu::rt
