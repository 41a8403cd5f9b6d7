// Device and pinned memory: cudaMalloc/cudaFree/cudaMallocHost/cudaFreeHost over host memory with
// guard zones, poison, a quarantine for freed blocks (use after free), the initialisation shadow,
// and the range checks the other parts use.
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sstream>

#include "runtime/registry.h"

namespace vgpu {
namespace rt {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::atomic<uint64_t> g_next_id{0};
std::atomic<size_t> g_device_bytes{0};
constexpr size_t kNominalDeviceBytes = size_t{80} << 30;

size_t quarantine_cap() {
  static const size_t cap = [] {
    const char* v = std::getenv("VGPU_QUARANTINE_MB");
    return (v && *v ? static_cast<size_t>(std::atoll(v)) : size_t{256}) << 20;
  }();
  return cap;
}

constexpr size_t kQuarantineBlocks = 1024;  // and at most this many blocks (registry scans stay short)

struct Quarantine {
  std::deque<AllocRecord*> q;  // oldest first; guarded by registry().mu
  size_t bytes = 0;
};
Quarantine& quarantine() {
  static Quarantine* q = new Quarantine;
  return *q;
}

const unsigned char* guard_pattern() {
  static const auto* p = [] {
    auto* b = new unsigned char[kGuardBytes];
    std::memset(b, kGuardByte, kGuardBytes);
    return b;
  }();
  return p;
}

// Offset of the first byte of [p, p+n) that differs from c, or n.
size_t first_not(const char* p, size_t n, unsigned char c) {
  const unsigned char* pat = c == kGuardByte ? guard_pattern() : nullptr;
  size_t i = 0;
  if (pat) {
    for (; i + kGuardBytes <= n; i += kGuardBytes)
      if (std::memcmp(p + i, pat, kGuardBytes) != 0) break;
  } else {
    uint64_t word;
    std::memset(&word, c, sizeof word);
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w != word) break;
    }
  }
  for (; i < n; ++i)
    if (static_cast<unsigned char>(p[i]) != c) return i;
  return n;
}

// Guard zones are [raw, base) and [base + bytes, raw + raw_bytes). Reports and repairs damage.
void verify_guards(AllocRecord& a, const std::string& after_what) {
  const size_t pre = static_cast<size_t>(a.base - a.raw);
  const size_t pre_bad = first_not(a.raw, pre, kGuardByte);
  char* post = a.base + a.bytes;
  const size_t post_n = static_cast<size_t>(a.raw + a.raw_bytes - post);
  const size_t post_bad = first_not(post, post_n, kGuardByte);
  if (pre_bad == pre && post_bad == post_n) return;
  std::ostringstream m;
  if (post_bad != post_n) {
    size_t last = post_bad;
    for (size_t i = post_bad; i < post_n; ++i)
      if (static_cast<unsigned char>(post[i]) != kGuardByte) last = i;
    m << "memory past the end of " << describe_record(a) << " was written: bytes " << post_bad << " to " << last
      << " after its last byte changed (detected after " << after_what
      << "). Device code or a copy wrote beyond the size passed to cudaMalloc." << site_lines(a);
    std::memset(post, kGuardByte, post_n);
  } else {
    m << "memory before the start of " << describe_record(a) << " was written: " << (pre - pre_bad)
      << " byte(s) before its first byte changed (detected after " << after_what
      << "). Device code or a copy wrote below the pointer cudaMalloc returned." << site_lines(a);
    std::memset(a.raw, kGuardByte, pre);
  }
  report_violation("out of bounds", m.str());
}

// Freed memory must keep its poison while in quarantine; anything else is a write after free.
void release_record(AllocRecord* a) {
  const size_t bad = first_not(a->base, a->bytes, kFreedByte);
  if (bad != a->bytes)
    report_violation("use after free", "byte " + std::to_string(bad) + " of " + describe_record(*a) +
                                           " changed after it was freed (a write through a stale pointer)." +
                                           site_lines(*a));
  verify_guards(*a, "its release from the quarantine of freed memory");
  std::free(a->raw);
  delete a;
}

AllocRecord* allocate(size_t bytes, int device, const char* api) {
  const size_t raw_bytes = kGuardBytes + round_up(bytes, kGuardBytes) + kGuardBytes;
  char* raw = static_cast<char*>(std::aligned_alloc(kGuardBytes, raw_bytes));
  if (!raw) return nullptr;
  auto* a = new AllocRecord;
  a->raw = raw;
  a->raw_bytes = raw_bytes;
  a->base = raw + kGuardBytes;
  a->bytes = bytes;
  a->device = device;
  a->id = ++g_next_id;
  a->alloc_site = make_site(api);
  std::memset(raw, kGuardByte, kGuardBytes);
  std::memset(a->base, kFreshByte, bytes);
  std::memset(a->base + bytes, kGuardByte, raw_bytes - kGuardBytes - bytes);
  if (device >= 0) a->init.reset(new std::atomic<uint64_t>[(bytes + 63) / 64]());
  std::unique_lock<std::shared_mutex> lock(registry().mu);
  registry().by_base[reinterpret_cast<uintptr_t>(a->base)] = a;
  return a;
}

const char* kind_word(int device) { return device >= 0 ? "device" : "pinned host"; }

// cudaFree / cudaFreeHost after the checks: poison, quarantine, release the oldest.
void retire(AllocRecord* a, std::shared_ptr<const Site> site) {
  verify_guards(*a, site->what);
  std::memset(a->base, kFreedByte, a->bytes);
  if (a->device >= 0) g_device_bytes -= a->bytes;
  std::vector<AllocRecord*> evicted;
  {
    std::lock_guard<std::mutex> race(race_mutex());
    race_forget(a);
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    a->freed = true;
    a->free_site = std::move(site);
    a->init.reset();
    Quarantine& q = quarantine();
    q.q.push_back(a);
    q.bytes += a->raw_bytes;
    while ((q.bytes > quarantine_cap() || q.q.size() > kQuarantineBlocks) && !q.q.empty()) {
      AllocRecord* old = q.q.front();
      q.q.pop_front();
      q.bytes -= old->raw_bytes;
      registry().by_base.erase(reinterpret_cast<uintptr_t>(old->base));
      evicted.push_back(old);
    }
  }
  for (AllocRecord* old : evicted) release_record(old);
}

}  // namespace

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

AllocRecord* find_locked(const void* p) {
  auto& m = registry().by_base;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(addr);
  if (it == m.begin()) return nullptr;
  --it;
  AllocRecord* a = it->second;
  if (addr < it->first + a->bytes) return a;
  return nullptr;
}

std::string describe_record(const AllocRecord& a) {
  std::ostringstream m;
  m << "allocation #" << a.id << " (" << a.bytes << " bytes of " << kind_word(a.device) << " memory";
  if (a.device >= 0) m << " on device " << a.device;
  m << ")";
  return m.str();
}

std::string site_lines(const AllocRecord& a) {
  std::string out = "\n  allocation #" + std::to_string(a.id) + " allocated by: " +
                    (a.alloc_site ? a.alloc_site->describe() : std::string("?"));
  if (a.freed && a.free_site) out += "\n  freed by: " + a.free_site->describe();
  return out;
}

MemClass classify(const void* p) {
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  if (!a) return {MemKind::Pageable, -1};
  if (a->freed) return {MemKind::Freed, a->device};
  return {a->device >= 0 ? MemKind::Device : MemKind::Pinned, a->device};
}

void check_all_guards(int device, const std::string& after_what) {
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  for (auto& [addr, a] : registry().by_base)
    if (!a->freed && a->device == device) verify_guards(*a, after_what);
}

}  // namespace rt

using rt::AllocRecord;
using rt::find_locked;
using rt::registry;

std::optional<AllocInfo> find_allocation(const void* p) {
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  if (!a || a->freed) return std::nullopt;
  return AllocInfo{a->base, a->bytes, a->device, a->id};
}

bool check_range(const void* p, size_t bytes, const std::string& what, bool allow_pinned) {
  if (bytes == 0) return true;
  std::ostringstream m;
  const char* kind = "out of bounds";
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = find_locked(p);
    if (a && a->freed) {
      kind = "use after free";
      m << what << " uses " << bytes << " bytes at offset " << (static_cast<const char*>(p) - a->base) << " of "
        << rt::describe_record(*a) << ", which was freed. Memory must not be used after cudaFree/cudaFreeHost."
        << rt::site_lines(*a);
    } else if (a) {
      const size_t off = static_cast<size_t>(static_cast<const char*>(p) - a->base);
      if (a->device < 0 && !allow_pinned) {
        m << what << " needs device memory but got pinned host memory, " << rt::describe_record(*a) << "."
          << rt::site_lines(*a);
      } else if (bytes > a->bytes - off) {
        m << what << " uses bytes [" << off << ", " << off + bytes << ") of " << rt::describe_record(*a)
          << ", overrunning its end by " << (off + bytes - a->bytes) << " byte(s)." << rt::site_lines(*a);
      } else {
        return true;
      }
    } else {
      // Not inside any allocation: name the nearest one when p is just outside it.
      auto& mp = registry().by_base;
      const auto addr = reinterpret_cast<uintptr_t>(p);
      auto it = mp.upper_bound(addr);
      std::string near;
      if (it != mp.begin()) {
        auto prev = std::prev(it);
        const uintptr_t end = prev->first + prev->second->bytes;
        if (addr >= end && addr < end + rt::kGuardBytes * 2)
          near = " It starts " + std::to_string(addr - end) + " byte(s) past the end of " +
                 rt::describe_record(*prev->second) + "." + rt::site_lines(*prev->second);
      }
      if (near.empty() && it != mp.end() && it->first - addr <= rt::kGuardBytes)
        near = " It starts " + std::to_string(it->first - addr) + " byte(s) before " +
               rt::describe_record(*it->second) + "." + rt::site_lines(*it->second);
      kind = p ? "invalid pointer" : "null pointer";
      m << what << " uses " << bytes << " bytes at " << p << ", which is not inside any "
        << (allow_pinned ? "device or pinned host" : "device") << " allocation (cudaMalloc"
        << (allow_pinned ? "/cudaMallocHost" : "") << ")." << near;
    }
  }
  report_violation(kind, m.str());
  return false;
}

void check_guards(const void* p, const std::string& after_what) {
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  if (a && !a->freed) rt::verify_guards(*a, after_what);
}

// Initialisation shadow: one bit per byte of device memory (1: written since cudaMalloc).
void mark_initialized(const void* p, size_t bytes) {
  if (bytes == 0) return;
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  if (!a || a->freed || !a->init) return;
  size_t lo = static_cast<size_t>(static_cast<const char*>(p) - a->base);
  const size_t hi = std::min(a->bytes, lo + bytes);
  std::atomic<uint64_t>* w = a->init.get();
  while (lo < hi) {
    const size_t word = lo / 64, bit = lo % 64;
    const size_t n = std::min<size_t>(64 - bit, hi - lo);
    const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
    if (mask == ~uint64_t{0})
      w[word].store(mask, std::memory_order_relaxed);
    else
      w[word].fetch_or(mask, std::memory_order_relaxed);
    lo += n;
  }
}

void check_initialized(const void* p, size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  std::string msg;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = find_locked(p);
    if (!a || a->freed || !a->init) return;
    const size_t start = static_cast<size_t>(static_cast<const char*>(p) - a->base);
    const size_t hi = std::min(a->bytes, start + bytes);
    const std::atomic<uint64_t>* w = a->init.get();
    size_t lo = start;
    while (lo < hi) {
      const size_t word = lo / 64, bit = lo % 64;
      const size_t n = std::min<size_t>(64 - bit, hi - lo);
      const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
      const uint64_t missing = ~w[word].load(std::memory_order_relaxed) & mask;
      if (missing) {
        const size_t first = word * 64 + static_cast<size_t>(__builtin_ctzll(missing));
        size_t count = 0;
        for (size_t i = first; i < hi; ++i)
          if (!(w[i / 64].load(std::memory_order_relaxed) >> (i % 64) & 1)) ++count;
        std::ostringstream m;
        m << what << " reads bytes [" << start << ", " << hi << ") of " << rt::describe_record(*a) << ", but "
          << count << " of them (the first at offset " << first
          << ") were never written since cudaMalloc (by a copy, memset, kernel, GEMM or collective); cudaMalloc "
             "does not initialise memory."
          << rt::site_lines(*a);
        msg = m.str();
        break;
      }
      lo += n;
    }
  }
  if (!msg.empty()) report_violation("uninitialized read", msg);
}

}  // namespace vgpu

using vgpu::rt::AllocRecord;
using vgpu::rt::find_locked;
using vgpu::rt::registry;
using vgpu::rt::ret;

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  const cudaError_t e = vgpu::rt::context_error();
  if (e != cudaSuccess) return ret(e);
  if (size == 0) {  // nothing to allocate
    *devPtr = nullptr;
    return cudaSuccess;
  }
  if (size > vgpu::rt::kNominalDeviceBytes - std::min(vgpu::rt::kNominalDeviceBytes, vgpu::rt::g_device_bytes.load()))
    return ret(cudaErrorMemoryAllocation);  // beyond the nominal totalGlobalMem
  AllocRecord* a = vgpu::rt::allocate(size, vgpu::current_device(), "cudaMalloc");
  if (!a) return ret(cudaErrorMemoryAllocation);
  vgpu::rt::g_device_bytes += size;
  *devPtr = a->base;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return ret(cudaErrorInvalidValue);
  const cudaError_t e = vgpu::rt::context_error();
  if (e != cudaSuccess) return ret(e);
  if (size == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  AllocRecord* a = vgpu::rt::allocate(size, -1, "cudaMallocHost");
  if (!a) return ret(cudaErrorMemoryAllocation);
  *ptr = a->base;
  return cudaSuccess;
}

namespace {
// Shared by cudaFree and cudaFreeHost: the pointer must be the start of a live allocation of
// the right kind.
cudaError_t free_common(void* p, bool pinned, std::shared_ptr<const vgpu::Site> site) {
  const char* api = pinned ? "cudaFreeHost" : "cudaFree";
  if (!p) return cudaSuccess;  // CUDA: "If devPtr is 0, no operation is performed"
  cudaError_t e = vgpu::rt::context_error();
  if (e != cudaSuccess) return ret(e);
  AllocRecord* a = nullptr;
  std::string problem;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    a = find_locked(p);
    if (!a) {
      std::ostringstream m;
      m << api << "(" << p << ") got a pointer that no " << (pinned ? "cudaMallocHost" : "cudaMalloc")
        << " returned (it lies inside no live or recently freed allocation).";
      problem = m.str();
    } else if (a->freed) {
      problem = std::string(api) + " of " + vgpu::rt::describe_record(*a) + ", which was already freed (double free)." +
                vgpu::rt::site_lines(*a);
    } else if ((a->device < 0) != pinned) {
      problem = std::string(api) + " of " + vgpu::rt::describe_record(*a) + ": " +
                (pinned ? "device memory is freed with cudaFree" : "pinned host memory is freed with cudaFreeHost") +
                "." + vgpu::rt::site_lines(*a);
    } else if (a->base != p) {
      problem = std::string(api) + " got a pointer " + std::to_string(static_cast<char*>(p) - a->base) +
                " bytes inside " + vgpu::rt::describe_record(*a) + "; only the pointer the allocation returned "
                "can be freed." + vgpu::rt::site_lines(*a);
    }
  }
  if (!problem.empty()) {
    vgpu::report_violation("invalid free", problem);
    return ret(cudaErrorInvalidValue);
  }
  // cudaFree of cudaMalloc memory synchronises the device (cuMemFree: "may perform implicit
  // synchronization"; in practice the device is idle when it returns) so no queued work can
  // still use the block; cudaFreeHost likewise waits for the current device.
  e = vgpu::rt::sync_device(pinned ? vgpu::current_device() : a->device);
  vgpu::rt::retire(a, std::move(site));
  if (e != cudaSuccess) return ret(e);
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaFree(void* devPtr) {
  if (!devPtr) return cudaSuccess;
  auto site = vgpu::rt::make_site("cudaFree");
  const cudaError_t e = free_common(devPtr, false, site);
  return e;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  auto site = vgpu::rt::make_site("cudaFreeHost");
  const cudaError_t e = free_common(ptr, true, site);
  return e;
}
