// Device and pinned memory's address ranges (arena.h).
#include "runtime/arena.h"
#include "runtime/protect.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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
  int file = -1;    // device memory's memory file, mapped kTags times (-1: device memory anonymous, one view)
  Range ranges[2];  // ArenaKind::Device (offsets in view 0), ArenaKind::Pinned
};

// Maps the memory file at every view of [base, base + tags * kReserve); false (nothing changed
// that the caller must undo but the file) when the system refuses.
bool map_views(char* base, unsigned tags, int* file) {
  const int fd = ::memfd_create("vgpu-device-memory", MFD_CLOEXEC);
  if (fd < 0) return false;
  if (::ftruncate(fd, static_cast<off_t>(kReserve)) != 0) {
    ::close(fd);
    return false;
  }
  for (unsigned v = 0; v < tags; ++v) {
    void* m = ::mmap(base + v * kReserve, kReserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
                     fd, 0);
    if (m == MAP_FAILED) {
      ::mmap(base, v * kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      ::close(fd);
      return false;
    }
  }
  *file = fd;
  return true;
}

// Device memory in the memory file: mapped in every view always, nothing to protect or unmap.
bool in_file(const Arena& a, ArenaKind kind) { return kind == ArenaKind::Device && a.file >= 0; }

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
    // kTags views of device memory and the pinned range above them (kFewerTags, or one where the
    // address space is limited); one view where the memory file cannot be made.
    void* r = MAP_FAILED;
    unsigned tags = 0;
    for (unsigned t : {kTags, kFewerTags, 1u}) {
      r = ::mmap(nullptr, (t + 1) * kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (r != MAP_FAILED) {
        tags = t;
        break;
      }
    }
    if (r == MAP_FAILED) {
      a.failed = true;
    } else {
      a.reserved = true;
      char* base = static_cast<char*>(r);
      const bool views = tags > 1 && map_views(base, tags, &a.file);
      a.ranges[0].base = base;
      a.ranges[1].base = base + (views ? tags : 1) * kReserve;
      g_arena.lo = reinterpret_cast<uintptr_t>(r);
      g_arena.mid = reinterpret_cast<uintptr_t>(a.ranges[1].base);
      g_arena.hi = g_arena.mid + kReserve;
      g_arena.view = views ? kReserve : 0;
      g_arena.tags = views ? tags : 1;
      if (views) protect_views(base, kReserve, tags);
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
  if (!in_file(a, kind) && ::mprotect(r.p, n, PROT_READ | PROT_WRITE) != 0) {
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
  // The range faults (pinned memory, or device memory without views) until it is handed out
  // again; its memory stays (up to kKeepResident) or goes back to the system.
  const bool keep = g.resident + n <= kKeepResident;
  if (in_file(a, kind)) {
    if (keep)
      g.resident += n;
    else
      ::fallocate(a.file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, p - g.base, static_cast<off_t>(n));
  } else if (keep) {
    ::mprotect(p, n, PROT_NONE);
    g.resident += n;
  } else {
    ::mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  g.free_by_size[n].push_back({p, keep});
}

}  // namespace vgpu::rt
