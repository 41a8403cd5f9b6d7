// Device and pinned memory: cudaMalloc/cudaFree/cudaMallocHost/cudaFreeHost over host memory with
// guard zones, poison, a quarantine for freed blocks (use after free), the initialisation shadow,
// and the range checks the other parts use.
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sstream>

#include "kernel/raw_memory.h"
#include "runtime/protect.h"
#include "runtime/arena.h"
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

// Guard zones are [raw, base) and [base + dev_bytes, raw + raw_bytes) (dev_bytes: the size, or
// the current sub-allocation's size in stream order). Reports and repairs damage.
void verify_guards(AllocRecord& a, const std::string& after_what) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  const size_t pre = static_cast<size_t>(a.base - a.raw);
  const size_t pre_bad = first_not(a.raw, pre, kGuardByte);
  char* post = a.base + a.dev_bytes;
  const size_t post_n = static_cast<size_t>(a.raw + a.raw_bytes - post);
  const size_t post_bad = first_not(post, post_n, kGuardByte);
  if (pre_bad == pre && post_bad == post_n) return;
  std::ostringstream m;
  if (post_bad != post_n) {
    size_t last = post_bad;
    for (size_t i = post_bad; i < post_n; ++i)
      if (static_cast<unsigned char>(post[i]) != kGuardByte) last = i;
    m << "memory past the end of " << describe_record(a) << " was written: bytes " << post_bad << " to " << last
      << " after its last byte changed (detected after " << after_what << "). Device code or a copy wrote beyond "
      << (a.sub == Sub::None ? "the size passed to cudaMalloc." : "the size its caching allocator was asked for.")
      << site_lines(a);
    vgpu::kernel::raw_memset(post, kGuardByte, post_n);
  } else {
    m << "memory before the start of " << describe_record(a) << " was written: " << (pre - pre_bad)
      << " byte(s) before its first byte changed (detected after " << after_what
      << "). Device code or a copy wrote below the pointer cudaMalloc returned." << site_lines(a);
    vgpu::kernel::raw_memset(a.raw, kGuardByte, pre);
  }
  report_violation("out of bounds", m.str());
}

FormerUser as_former_user(const AllocRecord& a) { return FormerUser{a.tag, a.id, a.bytes, a.alloc_site, a.free_site}; }

// The last kFormerUsers users of a's memory, newest last.
void remember_former_user(AllocRecord& a, FormerUser f) {
  constexpr size_t kFormerUsers = 8;
  if (a.former.size() == kFormerUsers) a.former.erase(a.former.begin());
  a.former.push_back(std::move(f));
}

// The last user of device memory that left the quarantine, by its view 0 address, until a new
// allocation takes the address (registry().mu held): the new one's tag differs from it, and a
// stale pointer of it is named in reports.
std::map<uintptr_t, FormerUser>& released_users() {
  static auto* m = new std::map<uintptr_t, FormerUser>;
  return *m;
}

// Freed memory must keep its poison while in quarantine; anything else is a write after free.
void release_record(AllocRecord* a) {
  const size_t bad = first_not(a->base, a->bytes, kFreedByte);
  if (bad != a->bytes)
    report_violation("use after free", "byte " + std::to_string(bad) + " of " + describe_record(*a) +
                                           " changed after it was freed (a write through a stale pointer)." +
                                           site_lines(*a));
  verify_guards(*a, "its release from the quarantine of freed memory");
  if (a->device >= 0 && tags_enabled()) {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    released_users()[reinterpret_cast<uintptr_t>(a->base)] = as_former_user(*a);
  }
  arena_release(a->raw, a->raw_bytes, a->device >= 0 ? ArenaKind::Device : ArenaKind::Pinned);
  delete a;
}

// A tag for a's users (registry().mu held, a in the registry): not `avoid` (its last user's) and
// not its neighbours' in the memory (an index that runs past a guard zone into the next
// allocation then carries the wrong tag), in turn over 1..tags-1 (0, view 0, is the runtime's).
unsigned pick_tag(const AllocRecord& a, unsigned avoid) {
  if (!tags_enabled()) return 0;
  const unsigned tags = g_arena.tags;
  static unsigned next = 0;  // guarded by registry().mu
  auto& m = registry().by_base;
  auto it = m.find(reinterpret_cast<uintptr_t>(a.base));
  const unsigned before = it != m.begin() ? std::prev(it)->second->tag : 0;
  const unsigned after = std::next(it) != m.end() ? std::next(it)->second->tag : 0;
  for (unsigned i = 0;; ++i) {
    const unsigned t = 1 + next++ % (tags - 1);
    if ((t != avoid && t != before && t != after) || i >= tags) return t;
  }
}

AllocRecord* allocate(size_t bytes, int device, const char* api) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  const size_t raw_bytes = kGuardBytes + round_up(bytes, kGuardBytes) + kGuardBytes;
  // Device and pinned memory in their own address ranges (arena.h).
  char* raw = arena_allocate(raw_bytes, device >= 0 ? ArenaKind::Device : ArenaKind::Pinned);
  if (!raw) return nullptr;
  auto* a = new AllocRecord;
  a->raw = raw;
  a->raw_bytes = raw_bytes;
  a->base = raw + kGuardBytes;
  a->bytes = bytes;
  a->capacity = bytes;
  a->dev_bytes = bytes;
  a->device = device;
  a->id = ++g_next_id;
  a->alloc_site = make_site(api);
  vgpu::kernel::raw_memset(raw, kGuardByte, kGuardBytes);
  vgpu::kernel::raw_memset(a->base, kFreshByte, bytes);
  vgpu::kernel::raw_memset(a->base + bytes, kGuardByte, raw_bytes - kGuardBytes - bytes);
  if (device >= 0) a->init.reset(new std::atomic<uint64_t>[(bytes + 63) / 64]());
  std::unique_lock<std::shared_mutex> lock(registry().mu);
  registry().by_base[reinterpret_cast<uintptr_t>(a->base)] = a;
  if (device >= 0) {
    unsigned avoid = 0;
    auto& released = released_users();
    if (auto it = released.find(reinterpret_cast<uintptr_t>(a->base)); it != released.end()) {
      avoid = it->second.tag;
      remember_former_user(*a, std::move(it->second));
      released.erase(it);
    }
    a->tag = a->dev_tag = pick_tag(*a, avoid);
  }
  return a;
}

const char* kind_word(int device) { return device >= 0 ? "device" : "pinned host"; }

// cudaFree / cudaFreeHost after the checks: poison, quarantine, release the oldest.
void retire(AllocRecord* a, std::shared_ptr<const Site> site) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  verify_guards(*a, site->what);
  vgpu::kernel::raw_memset(a->base, kFreedByte, a->bytes);
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

// ---- Sub-allocations (vgpu/suballoc.h) ----

void clear_shadow(AllocRecord& a) {
  if (!a.init) return;
  for (size_t w = 0, n = (a.capacity + 63) / 64; w < n; ++w) a.init[w].store(0, std::memory_order_relaxed);
}

// The freed poison of [base, base + capacity) is intact, else a violation message (registry().mu held).
std::string freed_poison_problem(const AllocRecord& a, const std::string& who) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  const size_t bad = first_not(a.base, a.capacity, kFreedByte);
  if (bad == a.capacity) return "";
  return "byte " + std::to_string(bad) + " of " + who +
         " changed after it was given back to its caching allocator (a write through a stale pointer to a freed "
         "tensor).";
}

// The record that starts at p's memory (p of any tag), or null (registry().mu held).
AllocRecord* block_locked(const void* p) {
  auto it = registry().by_base.find(reinterpret_cast<uintptr_t>(untag(p)));
  return it == registry().by_base.end() ? nullptr : it->second;
}

// Stream-ordered part of a sub-allocation: the user's bytes poisoned as after cudaMalloc and
// uninitialised, the rest of the block a guard zone. `previous` (when the block was freed by
// an earlier user): that user's description, for a report of a changed poison.
void device_sub_allocate(void* block, size_t bytes, unsigned tag, const std::string& previous) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  std::string problem;
  AllocRecord* a;
  size_t capacity;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    a = block_locked(block);
    if (!a || a->freed) return;  // not freed meanwhile: cudaFree first waits for the stream running this
    capacity = a->capacity;
    // (Not when the free's part never ran: a device whose context was corrupted runs nothing.)
    if (!previous.empty() && a->freed_poison) problem = freed_poison_problem(*a, previous);
  }
  // The large fills happen outside the registry's lock, in an order that a concurrent guard check
  // never mistakes for damage: the new guard zone first, then the extent, then the user's bytes.
  vgpu::kernel::raw_memset(a->base + bytes, kGuardByte, capacity - bytes);
  {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    a->freed_poison = false;
    a->dev_bytes = bytes;
    a->dev_tag = tag;  // kernels of the new user run from here on
    clear_shadow(*a);
  }
  vgpu::kernel::raw_memset(a->base, kFreshByte, bytes);
  if (!problem.empty()) report_violation("use after free", problem);
}

// Stream-ordered part of a sub-allocation's free: guards checked, the block poisoned with the
// freed pattern and uninitialised.
void device_sub_free(void* block, const std::string& who) {
  const DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  AllocRecord* a;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    a = block_locked(block);
    if (!a || a->freed) return;
    verify_guards(*a, "the free of " + who);
  }
  {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    a->dev_bytes = a->capacity;
    a->freed_poison = true;
    clear_shadow(*a);
  }
  vgpu::kernel::raw_memset(a->base, kFreedByte, a->capacity);
}

// Queues `work` on `stream` as a write of the whole block (the race checker orders it against
// every earlier use of the block), or with a null stream runs it now as a write by the host.
void sub_work(void* block, size_t capacity, cudaStream_t stream, std::shared_ptr<const Site> site,
              std::function<void()> work) {
  if (stream) {
    cudaError_t e = cudaSuccess;
    StreamImpl* s = lookup_stream(stream, site->what.c_str(), &e);
    if (s) {
      Item it;
      it.work = [work = std::move(work)] {
        work();
        return cudaSuccess;
      };
      it.site = std::move(site);
      it.self_contained = true;
      it.through_view0 = true;
      it.ranges.push_back(Range{block, capacity, Access::Write});
      submit(s, std::move(it));
      return;
    }
  }
  if (racecheck_enabled()) {
    std::lock_guard<std::mutex> race(race_mutex());
    race_on_host_write(block, capacity, site);
  }
  work();
}

}  // namespace

// cudaFree of a block a caching allocator sub-allocated: the freed poison checked, the record
// made the whole block again (after the device was synchronised).
void end_sub(AllocRecord* a) {
  std::string problem;
  {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    if (a->sub == Sub::None) return;
    if (a->sub == Sub::Freed && a->freed_poison) {
      problem = freed_poison_problem(*a, describe_record(*a));
      if (!problem.empty()) problem += site_lines(*a);
    } else {
      verify_guards(*a, "cudaFree of its block");
    }
    a->bytes = a->dev_bytes = a->capacity;
    a->id = a->block_id;
    a->alloc_site = std::move(a->block_site);
    a->free_site.reset();
    a->sub = Sub::None;
    a->freed_poison = false;
  }
  if (!problem.empty()) report_violation("use after free", problem);
}

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

AllocRecord* find_locked(const void* p) {
  auto& m = registry().by_base;
  const auto addr = reinterpret_cast<uintptr_t>(untag(p));
  auto it = m.upper_bound(addr);
  if (it == m.begin()) return nullptr;
  --it;
  AllocRecord* a = it->second;
  if (addr < it->first + a->bytes || (a->bytes == 0 && addr == it->first)) return a;
  return nullptr;
}

// The record whose guard zones or sub-allocation padding contain p (registry().mu held).
AllocRecord* find_near_locked(const void* p) {
  auto& m = registry().by_base;
  const auto addr = reinterpret_cast<uintptr_t>(untag(p));
  auto it = m.upper_bound(addr);
  if (it != m.end() && reinterpret_cast<uintptr_t>(it->second->raw) <= addr) return it->second;
  if (it == m.begin()) return nullptr;
  AllocRecord* a = std::prev(it)->second;
  return addr < reinterpret_cast<uintptr_t>(a->raw + a->raw_bytes) ? a : nullptr;
}

std::string describe_record(const AllocRecord& a) {
  std::ostringstream m;
  m << "allocation #" << a.id << " (" << a.bytes << " bytes of " << kind_word(a.device) << " memory";
  if (a.device >= 0) m << " on device " << a.device;
  if (a.sub != Sub::None)
    m << ", handed out by a caching allocator from cudaMalloc block #" << a.block_id << " of " << a.capacity
      << " bytes";
  m << ")";
  return m.str();
}

// "\n  allocation #id allocated by: ..." and, with a free site, "\n  freed by: ...".
std::string site_lines(uint64_t id, const std::shared_ptr<const Site>& alloc_site,
                       const std::shared_ptr<const Site>& free_site) {
  std::string out =
      "\n  allocation #" + std::to_string(id) + " allocated by: " + (alloc_site ? alloc_site->describe() : std::string("?"));
  if (free_site) out += "\n  freed by: " + free_site->describe();
  return out;
}

std::string site_lines(const AllocRecord& a) {
  return site_lines(a.id, a.alloc_site, gone(a) ? a.free_site : nullptr);
}

std::string tag_problem(const AllocRecord& a, const void* p, unsigned tag, bool* stale) {
  if (stale) *stale = false;
  const unsigned t = tag_of(p);
  if (t == tag || a.device < 0) return "";
  for (auto f = a.former.rbegin(); f != a.former.rend(); ++f) {
    if (f->tag != t) continue;
    if (stale) *stale = true;
    return "it is a stale pointer of allocation #" + std::to_string(f->id) + " (" + std::to_string(f->bytes) +
           " bytes), an earlier user of this memory, which now belongs to " + describe_record(a) +
           " (pointers carry their allocation's tag, vgpu/README.md)" + site_lines(f->id, f->alloc_site, f->free_site) +
           site_lines(a);
  }
  return "it lies in the memory of " + describe_record(a) + " but carries another allocation's tag (tag " +
         std::to_string(t) + ", the allocation's " + std::to_string(tag) +
         "): it was computed from another allocation's pointer (an index that ran from there into this one), or is "
         "a stale pointer of an earlier user of this memory (pointers carry their allocation's tag, "
         "vgpu/README.md)." +
         site_lines(a);
}

MemClass classify(const void* p) {
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  // In a guard zone or a sub-allocation's padding: the memory of that allocation, so that the
  // range checks report it rather than take it for host memory.
  if (!a) a = find_near_locked(p);
  if (!a) return {MemKind::Pageable, -1};
  if (gone(*a)) return {MemKind::Freed, a->device};
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
  if (!a || gone(*a) || !rt::tag_ok(*a, p)) return std::nullopt;
  return AllocInfo{rt::user_base(*a), a->bytes, a->device, a->id};
}

bool check_range(const void* p, size_t bytes, const std::string& what, bool allow_pinned) {
  if (bytes == 0) return true;
  std::ostringstream m;
  const char* kind = "out of bounds";
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = find_locked(p);
    bool stale = false;
    const std::string tag = a ? rt::tag_problem(*a, p, a->tag, &stale) : std::string();
    if (!tag.empty()) {
      kind = stale ? "use after free" : "out of bounds";
      m << what << " uses " << bytes << " bytes at " << p << ": " << tag;
    } else if (a && rt::gone(*a)) {
      kind = "use after free";
      m << what << " uses " << bytes << " bytes at offset " << rt::offset_of(*a, p) << " of "
        << rt::describe_record(*a)
        << (a->freed ? ", which was freed. Memory must not be used after cudaFree/cudaFreeHost."
                     : ", which was given back to its caching allocator (the tensor over it was freed). Memory "
                       "must not be used after it was freed.")
        << rt::site_lines(*a);
    } else if (a) {
      const size_t off = rt::offset_of(*a, p);
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
      const auto addr = reinterpret_cast<uintptr_t>(rt::untag(p));
      auto it = mp.upper_bound(addr);
      std::string near;
      if (it != mp.begin()) {
        auto prev = std::prev(it);
        const uintptr_t end = prev->first + prev->second->bytes;
        const uintptr_t raw_end = reinterpret_cast<uintptr_t>(prev->second->raw + prev->second->raw_bytes);
        if (addr >= end && addr < std::max<uintptr_t>(end + rt::kGuardBytes * 2, raw_end))
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

std::string explain_pointer(const void* p, bool* freed) {
  *freed = false;
  std::shared_lock<std::shared_mutex> lock(registry().mu);
  AllocRecord* a = find_locked(p);
  std::ostringstream m;
  bool stale = false;
  const std::string tag = a ? rt::tag_problem(*a, p, a->tag, &stale) : std::string();
  if (!tag.empty()) {
    *freed = stale;
    m << "It points at offset " << rt::offset_of(*a, p) << " of the memory of another allocation: " << tag;
  } else if (a && rt::gone(*a)) {
    *freed = true;
    m << "It points at offset " << rt::offset_of(*a, p) << " of " << rt::describe_record(*a)
      << ", which was freed." << rt::site_lines(*a);
  } else if (!a && (a = rt::find_near_locked(p))) {
    const char* c = rt::untag(p);
    if (c < a->base)
      m << "It points " << (a->base - c) << " byte(s) before " << rt::describe_record(*a) << ".";
    else
      m << "It points " << (c - (a->base + a->bytes)) << " byte(s) past the end of " << rt::describe_record(*a) << ".";
    m << rt::site_lines(*a);
  }
  return m.str();
}

// ---- Sub-allocations (vgpu/suballoc.h) ----

namespace {
std::atomic<long long> g_sub_quarantine_override{-1};
}

size_t sub_quarantine_bytes() {
  const long long o = g_sub_quarantine_override.load();
  if (o >= 0) return static_cast<size_t>(o);
  static const size_t env = [] {
    const char* v = std::getenv("VGPU_SUBALLOC_QUARANTINE_MB");
    return (v && *v ? static_cast<size_t>(std::atoll(v)) : size_t{64}) << 20;
  }();
  return env;
}

void set_sub_quarantine_bytes_for_testing(long long bytes) { g_sub_quarantine_override = bytes; }

namespace {
// A tensor's allocation and free sites: a backtrace each only with VGPU_SUBALLOC_BACKTRACE=1 (two
// per tensor would double the time of the vgpu suite; reports then name the allocator's call only).
std::shared_ptr<const Site> sub_site(const char* what) {
  static const bool frames = [] {
    const char* v = std::getenv("VGPU_SUBALLOC_BACKTRACE");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (frames) return rt::make_site(what);
  auto s = std::make_shared<Site>();
  s->what = what;
  return s;
}
}  // namespace

void* sub_allocate(void* block, size_t bytes, cudaStream_t stream) {
  const rt::DeviceAccess access;  // the runtime fills and checks device memory (protect.h)
  auto site = sub_site("tensor allocation (caching allocator)");
  std::string problem, previous;
  size_t capacity = 0;
  bool fresh = false;
  void* user = block;
  unsigned tag = 0;
  {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = rt::block_locked(block);
    std::ostringstream m;
    if (!a || a->freed || a->device < 0) {
      m << "a caching allocator handed out " << block << ", which is not a live cudaMalloc block.";
    } else if (bytes > a->capacity) {
      m << "a caching allocator handed out " << bytes << " bytes from " << rt::describe_record(*a)
        << ", which is smaller." << rt::site_lines(*a);
    } else if (a->sub == rt::Sub::Live) {
      m << "a caching allocator handed out " << rt::describe_record(*a)
        << " again while its user still holds it (one block given to two tensors)." << rt::site_lines(*a);
    } else {
      fresh = a->sub == rt::Sub::None;
      if (fresh) {
        a->block_id = a->id;
        a->block_site = std::move(a->alloc_site);
      } else {
        previous = rt::describe_record(*a) + rt::site_lines(*a);
        // The memory goes to its new user under a new tag: the last user's pointers become stale.
        rt::remember_former_user(*a, rt::as_former_user(*a));
        a->tag = rt::pick_tag(*a, a->tag);
      }
      a->sub = rt::Sub::Live;
      a->id = ++rt::g_next_id;
      a->bytes = bytes;
      a->alloc_site = site;
      a->free_site.reset();
      capacity = a->capacity;
      tag = a->tag;
      user = rt::user_base(*a);
      if (fresh) {  // nothing queued can use a block cudaMalloc has just returned: no stream order needed
        vgpu::kernel::raw_memset(a->base + bytes, rt::kGuardByte, capacity - bytes);
        a->dev_bytes = bytes;
      }
    }
    problem = m.str();
  }
  if (!problem.empty()) {
    report_violation("invalid allocation", problem);
    return block;
  }
  if (fresh) return user;
  rt::sub_work(user, capacity, stream, site,
               [user, bytes, tag, previous] { rt::device_sub_allocate(user, bytes, tag, previous); });
  return user;
}

const void* untagged(const void* p) { return rt::untag(p); }

void sub_free(void* block, cudaStream_t stream) {
  auto site = sub_site("tensor free (caching allocator)");
  std::string problem, who;
  size_t capacity = 0;
  {
    std::unique_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = rt::block_locked(block);
    if (a && !a->freed && !rt::tag_ok(*a, block)) {
      problem = "a caching allocator took back " + rt::describe_record(*a) + " through another pointer than the one " +
                "it handed out: " + rt::tag_problem(*a, block, a->tag, nullptr);
    } else if (!a || a->freed || a->sub != rt::Sub::Live) {
      std::ostringstream m;
      m << "a caching allocator took back " << block << ", which "
        << (a && a->sub == rt::Sub::Freed ? "it already took back (double free)."
                                           : "it did not hand out (not a live sub-allocation).");
      if (a) m << rt::site_lines(*a);
      problem = m.str();
    } else {
      a->sub = rt::Sub::Freed;
      a->free_site = site;
      capacity = a->capacity;
      who = rt::describe_record(*a);
    }
  }
  if (!problem.empty()) {
    report_violation("invalid free", problem);
    return;
  }
  rt::sub_work(block, capacity, stream, site, [block, who] { rt::device_sub_free(block, who); });
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
  const size_t lo = rt::offset_of(*a, p);
  std::atomic<uint64_t>* w = a->init.get();
  rt::for_each_init_word(lo, std::min(a->bytes, lo + bytes), [w](size_t word, uint64_t mask) {
    if (mask == ~uint64_t{0})
      w[word].store(mask, std::memory_order_relaxed);
    else
      w[word].fetch_or(mask, std::memory_order_relaxed);
    return true;
  });
}

void check_initialized(const void* p, size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  std::string msg;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    AllocRecord* a = find_locked(p);
    if (!a || a->freed || !a->init) return;
    const size_t start = rt::offset_of(*a, p);
    const size_t hi = std::min(a->bytes, start + bytes);
    const std::atomic<uint64_t>* w = a->init.get();
    rt::for_each_init_word(start, hi, [&](size_t word, uint64_t mask) {
      const uint64_t missing = ~w[word].load(std::memory_order_relaxed) & mask;
      if (!missing) return true;
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
      return false;
    });
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
  *devPtr = vgpu::rt::user_base(*a);
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
    } else if (!vgpu::rt::tag_ok(*a, p)) {
      problem = std::string(api) + "(" + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                ") is not the pointer the allocation returned: " + vgpu::rt::tag_problem(*a, p, a->tag, nullptr);
    } else if (vgpu::rt::untag(p) != a->base) {
      problem = std::string(api) + " got a pointer " + std::to_string(vgpu::rt::offset_of(*a, p)) +
                " bytes inside " + vgpu::rt::describe_record(*a) + "; only the pointer the allocation returned "
                "can be freed." + vgpu::rt::site_lines(*a);
    } else if (a->sub == vgpu::rt::Sub::Live) {
      // A caching allocator frees a block that a user still holds: reported, then freed.
      vgpu::report_violation("use after free", std::string(api) + " of the cudaMalloc block under " +
                                                   vgpu::rt::describe_record(*a) +
                                                   ", which its caching allocator handed out and was not given back: "
                                                   "its user would go on using freed memory." +
                                                   vgpu::rt::site_lines(*a));
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
  vgpu::rt::end_sub(a);
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
