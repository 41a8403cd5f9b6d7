// The access checks of a kernel's loads and stores (access_check.h).
#include "kernel/access_check.h"
#include "runtime/protect.h"

#include <cuda_runtime.h>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernel/executor.h"
#include "kernel/shared_memory.h"
#include "kernel/stack_pool.h"
#include "runtime/arena.h"
#include "runtime/registry.h"

namespace vgpu::kernel {

constinit thread_local AccessTracker* t_access_tracker __attribute__((tls_model("initial-exec"))) = nullptr;
constinit thread_local AccessLog* t_write_log __attribute__((tls_model("initial-exec"))) = nullptr;
constinit thread_local AccessLog* t_read_log __attribute__((tls_model("initial-exec"))) = nullptr;

void AccessLog::finish() {
  if (runs_.size() < 2) return;
  std::sort(runs_.begin(), runs_.end());
  size_t out = 0;
  for (size_t i = 1; i < runs_.size(); ++i) {
    if (runs_[i].first <= runs_[out].second + kGap) runs_[out].second = std::max(runs_[out].second, runs_[i].second);
    else runs_[++out] = runs_[i];
  }
  runs_.resize(out + 1);
}

std::vector<std::pair<size_t, size_t>> AccessLog::within(const void* base, size_t bytes) const {
  const auto lo = reinterpret_cast<uintptr_t>(base), hi = lo + bytes;
  std::vector<std::pair<size_t, size_t>> out;
  auto it = std::lower_bound(runs_.begin(), runs_.end(), lo,
                             [](const std::pair<uintptr_t, uintptr_t>& r, uintptr_t a) { return r.second <= a; });
  for (; it != runs_.end() && it->first < hi; ++it)
    out.emplace_back(std::max(it->first, lo) - lo, std::min(it->second, hi) - lo);
  return out;
}
constinit thread_local bool t_vgpu_thread __attribute__((tls_model("initial-exec"))) = false;

void host_access(const void* p, size_t bytes, unsigned flags, const void* pc, const char* via) {
  static thread_local bool busy = false;  // what the report runs is not checked again
  if (t_vgpu_thread || busy) return;
  busy = true;
  if (!rt::in_device_arena(p)) {  // pinned memory: the host may touch it, once the streams are done with it
    rt::race_on_host_access(p, bytes, (flags & kWrite) != 0, pc, via);
    busy = false;
    return;
  }
  std::string what;
  {
    std::shared_lock<std::shared_mutex> lock(rt::registry().mu);
    const rt::AllocRecord* a = rt::find_locked(p);
    if (!a) a = rt::find_near_locked(p);
    what = a ? "byte offset " + std::to_string(rt::offset_of(*a, p)) + " of " +
                   rt::describe_record(*a) + rt::site_lines(*a)
             : "device memory no allocation holds";
  }
  report_violation("host access to device memory",
                   std::string("the host ") + ((flags & kWrite) ? "writes " : "reads ") + std::to_string(bytes) +
                       " byte(s)" + (via ? std::string(" with ") + via : std::string()) + " at " + what +
                       "\n  at " + describe_code_address(pc) +
                       "\nDevice memory is not accessible from the host: copy it with cudaMemcpy (CUDA C++ "
                       "Programming Guide, Device Memory); on a GPU this dereference faults or reads garbage.");
  rt::lend_device_access(p, bytes);  // captured: the access goes on (protect.h)
  busy = false;
}

namespace {
// -1: the environment's setting; else a vgpu::AccessChecks.
std::atomic<int> g_access_override{-1};

int access_check_mode() {
  const int o = g_access_override.load(std::memory_order_relaxed);
  if (o >= 0) return o;
  static const int env = [] {  // VGPU_ACCESS_CHECK: 0, once, anything else every launch
    const char* v = std::getenv("VGPU_ACCESS_CHECK");
    if (v && std::strcmp(v, "0") == 0) return static_cast<int>(AccessChecks::Off);
    if (v && std::strcmp(v, "once") == 0) return static_cast<int>(AccessChecks::Once);
    return static_cast<int>(AccessChecks::Every);
  }();
  return env;
}

// The launches checked so far under AccessChecks::Once, by identity (launch_identity).
std::mutex g_seen_mu;
std::unordered_set<uint64_t> g_seen;

// A launch's identity, FNV-1a over: the kernel and its site, the configuration, the parameters'
// values (KernelSpec::params_id, without the pointers) and for each pointer argument what the
// checks depend on: its allocation's extent, its offset there and which earlier argument shares
// the allocation (an in-place launch is another launch). The addresses themselves change from
// step to step.
uint64_t launch_identity(const detail::KernelSpec& spec) {
  detail::ParamHash hash;  // the parameters' FNV-1a (launch.h), continued here
  auto mix = [&hash](const void* p, size_t n) { hash.mix(p, n); };
  mix(spec.name, std::strlen(spec.name));
  if (spec.file) mix(spec.file, std::strlen(spec.file));
  mix(&spec.line, sizeof spec.line);
  const unsigned dims[] = {spec.grid.x, spec.grid.y, spec.grid.z, spec.block.x, spec.block.y, spec.block.z};
  mix(dims, sizeof dims);
  mix(&spec.shmem, sizeof spec.shmem);
  mix(&spec.params_id, sizeof spec.params_id);
  std::shared_lock<std::shared_mutex> lock(rt::registry().mu);
  std::vector<const rt::AllocRecord*> recs(spec.nargs);
  for (size_t a = 0; a < spec.nargs; ++a) {
    const rt::AllocRecord* r = spec.args[a] ? rt::find_locked(spec.args[a]) : nullptr;
    recs[a] = r;
    size_t shared_with = a;
    for (size_t e = 0; e < a; ++e)
      if (recs[e] == r) {
        shared_with = e;
        break;
      }
    const size_t where[] = {r ? r->bytes : 0, r ? rt::offset_of(*r, spec.args[a]) : 0, shared_with,
                            spec.args[a] ? size_t{1} : size_t{0}};
    mix(where, sizeof where);
  }
  return hash.h;
}
}  // namespace

bool access_checks_enabled() { return access_check_mode() != static_cast<int>(AccessChecks::Off); }

bool access_check_launch(const detail::KernelSpec& spec) {
  const int mode = access_check_mode();
  if (mode != static_cast<int>(AccessChecks::Once)) return mode == static_cast<int>(AccessChecks::Every);
  if (spec.params_id == 0) return true;  // a parameter with padding: no identity, always checked
  const uint64_t id = launch_identity(spec);
  std::lock_guard<std::mutex> lock(g_seen_mu);
  return g_seen.insert(id).second;
}

bool argument_check_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VGPU_ARGUMENT_CHECK");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

}  // namespace vgpu::kernel

namespace vgpu {
void set_access_checks(bool on) { set_access_checks(on ? AccessChecks::Every : AccessChecks::Off); }
void set_access_checks(AccessChecks mode) {
  if (mode == AccessChecks::Once) {
    std::lock_guard<std::mutex> lock(kernel::g_seen_mu);
    kernel::g_seen.clear();
  }
  kernel::g_access_override.store(static_cast<int>(mode));
}
bool access_checks() { return kernel::access_checks_enabled(); }
}  // namespace vgpu

namespace vgpu::kernel {

namespace {

// One access as the race check remembers it: who, after how many of the block's barriers and of
// its warp's synchronisations, which bytes of the 4-byte granule, from where in the code.
struct Acc {
  const void* pc = nullptr;
  uint32_t block = 0;  // linear; grids of more than 2^32 blocks wrap (never in tests)
  uint32_t epoch = 0;
  uint32_t wepoch = 0;
  uint16_t thread = 0;
  uint8_t mask = 0;
  bool atomic = false;
};
static_assert(sizeof(Acc) == 24);
// A granule's last write and the reads since that a later write may race with: from at most
// two blocks, at most two reads each (the latest of distinct threads). That loses no race with a
// read of whole granules: a write of a third block races with the reads of both blocks kept, and
// within a block a read ordered before a later one of it is ordered before any later write too.
struct Cell {
  static constexpr unsigned kReads = 4, kPerBlock = 2, kBlocks = 2;
  Acc w;
  Acc r[kReads];
  uint32_t gen = 0;  // the launch the cell belongs to (CellTable)
  uint8_t nr = 0;
  bool has_w = false;

  template <class Pred> void drop_reads_if(const Pred& pred) {
    unsigned n = 0;
    for (unsigned i = 0; i < nr; ++i)
      if (!pred(r[i])) r[n++] = r[i];
    nr = static_cast<uint8_t>(n);
  }
};

// The cells of one launch, by granule address: chunks of 64 cells (256 bytes of memory), found
// through a directory of 256-byte pages, and reused by later launches without clearing: a cell,
// or a directory entry, belongs to the launch whose generation it carries.
class CellTable {
 public:
  void clear() {
    if (++gen_ == 0) {  // wrapped: forget everything for real
      for (auto& c : chunks_)
        for (size_t i = 0; i < kChunk; ++i) c[i].gen = 0;
      for (Entry& e : dir_) e.gen = 0;
      gen_ = 1;
    }
    used_ = 0;
    last_page_ = ~uintptr_t{0};
  }
  Cell& at(uintptr_t gran) {
    const uintptr_t page = gran >> kPageShift;
    if (page != last_page_) {
      last_chunk_ = chunk_of(page);
      last_page_ = page;
    }
    Cell& c = last_chunk_[(gran >> 2) & (kChunk - 1)];
    if (c.gen != gen_) {
      c = Cell{};
      c.gen = gen_;
    }
    return c;
  }

 private:
  static constexpr unsigned kPageShift = 8;
  static constexpr size_t kChunk = size_t{1} << (kPageShift - 2);
  struct Entry {
    uintptr_t page = 0;
    uint32_t gen = 0;
    uint32_t chunk = 0;
  };
  static size_t hash(uintptr_t page) { return static_cast<size_t>(page * 0x9E3779B97F4A7C15ull >> 24); }
  Cell* chunk_of(uintptr_t page) {
    if ((used_ + 1) * 2 > dir_.size()) grow();
    const size_t mask = dir_.size() - 1;
    for (size_t i = hash(page) & mask;; i = (i + 1) & mask) {
      Entry& e = dir_[i];
      if (e.gen == gen_ && e.page == page) return chunks_[e.chunk].get();
      if (e.gen != gen_) {
        if (used_ == chunks_.size()) chunks_.emplace_back(new Cell[kChunk]);
        e = Entry{page, gen_, static_cast<uint32_t>(used_++)};
        return chunks_[e.chunk].get();
      }
    }
  }
  void grow() {
    std::vector<Entry> old;
    old.swap(dir_);
    dir_.resize(old.empty() ? 1024 : old.size() * 2);
    const size_t mask = dir_.size() - 1;
    for (const Entry& o : old) {
      if (o.gen != gen_) continue;
      size_t i = hash(o.page) & mask;
      while (dir_[i].gen == gen_) i = (i + 1) & mask;
      dir_[i] = o;
    }
  }
  std::vector<Entry> dir_;
  std::vector<std::unique_ptr<Cell[]>> chunks_;
  size_t used_ = 0;  // chunks (and directory entries) of this launch
  uint32_t gen_ = 1;
  uintptr_t last_page_ = ~uintptr_t{0};
  Cell* last_chunk_ = nullptr;
};

// A region of memory the kernel touches: a device (or pinned) allocation, or a __shared__ variable.
struct Region {
  const char* lo;
  const char* hi;
  rt::AllocRecord* rec;        // null for shared memory
  const std::string* shared;  // the variable's name, for shared memory
};

enum Kind : unsigned { kOutOfBounds, kUseAfterFree, kUninitialized, kRace, kKinds };
constexpr uintptr_t kGuardSlack = 2 * rt::kGuardBytes;  // a record's raw bytes begin this far below its base
constexpr const char* kKindNames[kKinds] = {"out of bounds", "use after free", "uninitialized read", "data race"};

struct Pending {
  std::string message;
  const void* pc[2];
  int npc;
  uint64_t more = 0;  // further findings of this kind in the launch
};

std::string dim3_text(uint64_t lin, dim3 d) {
  const uint64_t x = lin % d.x, y = (lin / d.x) % d.y, z = lin / (uint64_t(d.x) * d.y);
  char text[72];
  std::snprintf(text, sizeof text, "(%llu,%llu,%llu)", static_cast<unsigned long long>(x),
                static_cast<unsigned long long>(y), static_cast<unsigned long long>(z));
  return text;
}

}  // namespace

struct AccessTracker::Impl {
  const detail::KernelSpec* spec = nullptr;
  uint64_t block = 0;
  uint32_t thread = 0;  // of the access being checked
  std::vector<uint32_t> wepoch;
  const char* closure_lo = nullptr;
  const char* closure_hi = nullptr;
  const char* stack_lo = nullptr;
  const char* stack_hi = nullptr;
  ThreadSharedMemory shared;
  std::deque<Region> regions;       // allocations met in this launch (a deque: pointers stay valid)
  const Region* last = nullptr;     // the one the last access hit
  std::vector<Region> shared_vars;  // this thread's __shared__ variables, by address
  std::vector<bool> shared_used;    // which of them the kernel touched
  std::unordered_set<uintptr_t> host_pages;  // 4 KiB pages that hold no device memory
  std::unordered_set<uintptr_t> host_lines;  // 64-byte lines that hold none (in pages that do)
  CellTable cells;
  bool any = false;
  Pending pending[kKinds];
  bool found[kKinds] = {};

  std::string who(uint64_t blk, uint32_t thread) const {
    return "thread " + dim3_text(thread, spec->block) + " of block " + dim3_text(blk, spec->grid);
  }
  std::string where(const Region& g, const char* p) const {
    if (g.shared) return "byte " + std::to_string(p - g.lo) + " of __shared__ " + *g.shared;
    return "byte offset " + std::to_string(p - g.lo) + " of " + rt::describe_record(*g.rec);
  }
  void report(Kind k, std::string message, const void* pc0, const void* pc1 = nullptr) {
    if (found[k]) {
      ++pending[k].more;
      return;
    }
    found[k] = true;
    pending[k].message = std::move(message);
    pending[k].pc[0] = pc0;
    pending[k].pc[1] = pc1;
    pending[k].npc = pc1 ? 2 : 1;
    pending[k].more = 0;
  }

  const Region* find(const char* p, size_t bytes, const void* pc);
  // Whether one of the launch's pointer arguments points into g (or one past its end); true when
  // the arguments are not known (a grid run without a launch) or the check is off.
  bool argument_points_into(const Region& g) const {
    if (!spec->args || !argument_check_enabled()) return true;
    for (size_t i = 0; i < spec->nargs; ++i) {
      const char* q = static_cast<const char*>(spec->args[i]);
      if (q >= g.lo && q <= g.hi) return true;
    }
    return false;
  }
  void check_device(const Region& g, const char* p, size_t bytes, unsigned flags, const void* pc);
  void check_race(const Region& g, const char* p, size_t bytes, unsigned flags, const void* pc, uint32_t epoch);
  template <class Ordered>
  static void remember_read(Cell& c, const Acc& cur, const Ordered& ordered);
};

AccessTracker::AccessTracker() : impl_(new Impl) {}
AccessTracker::~AccessTracker() = default;

void AccessTracker::begin(const detail::KernelSpec& spec, const void* closure, const StackPool& stacks,
                          uint32_t warps) {
  Impl& m = *impl_;
  m.closure_lo = static_cast<const char*>(closure);
  m.closure_hi = m.closure_lo + spec.closure_bytes;
  m.spec = &spec;
  m.wepoch.assign(warps, 0);
  m.stack_lo = stacks.lo();
  m.stack_hi = stacks.hi();
  if (!m.shared.tls_lo) m.shared = this_thread_shared_memory();
  m.regions.clear();
  m.last = nullptr;
  if (m.shared_vars.empty())
    for (const SharedVariable& v : m.shared.variables)
      m.shared_vars.push_back(Region{v.addr, v.addr + v.bytes, nullptr, v.name});
  m.shared_used.assign(m.shared_vars.size(), false);
  m.host_pages.clear();
  m.host_lines.clear();
  m.cells.clear();
  m.any = false;
  for (bool& f : m.found) f = false;
  block_epoch_ = 0;
}

void AccessTracker::begin_block(uint64_t linear_block) {
  impl_->block = linear_block;
  block_epoch_ = 0;
  std::fill(impl_->wepoch.begin(), impl_->wepoch.end(), 0);
}

void AccessTracker::warp_done(uint32_t warp) { ++impl_->wepoch[warp]; }

bool AccessTracker::end() {
  Impl& m = *impl_;
  const std::string kernel = describe_kernel(*m.spec);
  // Static shared memory per block (CUDA C++ Programming Guide, Compute Capabilities: 48 KiB
  // without the opt-in of dynamic shared memory) plus the launch's dynamic bytes.
  size_t shared_bytes = m.spec->shmem;
  std::string names;
  for (size_t i = 0; i < m.shared_vars.size(); ++i)
    if (m.shared_used[i]) {
      shared_bytes += static_cast<size_t>(m.shared_vars[i].hi - m.shared_vars[i].lo);
      names += (names.empty() ? "" : ", ") + *m.shared_vars[i].shared;
    }
  if (shared_bytes > 48 * 1024)
    report_violation("shared memory", kernel + " uses " + std::to_string(shared_bytes) +
                                          " bytes of shared memory per block (" + names +
                                          "), more than the 48 KiB a block can have without the dynamic "
                                          "shared-memory opt-in (CUDA C++ Programming Guide, Compute Capabilities).");
  for (unsigned k = 0; k < kKinds; ++k) {
    if (!m.found[k]) continue;
    const Pending& p = m.pending[k];
    std::string s = kernel + ": " + p.message + "\n  at " + describe_code_address(p.pc[0]);
    if (p.npc > 1) s += "\n  and " + describe_code_address(p.pc[1]);
    if (p.more) s += "\n  (" + std::to_string(p.more) + " more in this launch)";
    report_violation(kKindNames[k], s);
  }
  m.cells.clear();
  return m.any;
}

// The region that holds p: a cached one, else the registry's answer (slow, then cached). Null for
// memory the checks leave alone (fiber stacks, the TLS block, the kernel's parameters, host data),
// and for device memory outside every allocation, which is reported here.
const Region* AccessTracker::Impl::find(const char* p, size_t bytes, const void* pc) {
  if (last && p >= last->lo && p < last->hi) return last;
  if ((p >= stack_lo && p < stack_hi) || (p >= closure_lo && p < closure_hi)) return nullptr;
  if (p >= shared.tls_lo && p < shared.tls_hi) {  // a __shared__ variable, a built-in, or past a variable
    auto it = std::upper_bound(shared_vars.begin(), shared_vars.end(), p,
                               [](const char* q, const Region& g) { return q < g.lo; });
    if (it != shared_vars.begin() && p < (it - 1)->hi) return &*(it - 1);
    for (const void* v : {static_cast<const void*>(&threadIdx), static_cast<const void*>(&blockIdx),
                          static_cast<const void*>(&blockDim), static_cast<const void*>(&gridDim)})
      if (p >= static_cast<const char*>(v) && p < static_cast<const char*>(v) + sizeof(dim3)) return nullptr;
    const Region* before = it != shared_vars.begin() ? &*(it - 1) : nullptr;
    report(kOutOfBounds,
           who(block, thread) + " accesses " + std::to_string(bytes) +
               " byte(s) of thread-local storage outside every __shared__ variable" +
               (before ? ", " + std::to_string(p - before->hi) + " byte(s) past the end of __shared__ " +
                             *before->shared + " (" + std::to_string(before->hi - before->lo) + " bytes)"
                       : std::string()) +
               ": an index beyond a __shared__ array.",
           pc);
    return nullptr;
  }
  for (const Region& g : regions)
    if (p >= g.lo && p < g.hi) return last = &g;
  const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> 12, line = reinterpret_cast<uintptr_t>(p) >> 6;
  if (host_pages.count(page) || host_lines.count(line)) return nullptr;
  std::shared_lock<std::shared_mutex> lock(rt::registry().mu);
  rt::AllocRecord* a = rt::find_locked(p);
  if (a) {
    bool stale = false;
    const std::string tag = rt::tag_problem(*a, p, a->dev_tag, &stale);
    if (!tag.empty()) {  // the memory is there (every view maps it): reported, then the access goes on
      report(stale ? kUseAfterFree : kOutOfBounds,
             who(block, thread) + " accesses " + std::to_string(bytes) + " byte(s) at byte offset " +
                 std::to_string(rt::offset_of(*a, p)) + " of the memory of " + rt::describe_record(*a) + ": " + tag,
             pc);
      return nullptr;
    }
    if (a->freed || (a->sub == rt::Sub::Freed && a->freed_poison)) {
      report(kUseAfterFree,
             who(block, thread) + " accesses " + std::to_string(bytes) + " byte(s) at offset " +
                 std::to_string(rt::offset_of(*a, p)) + " of " + rt::describe_record(*a) + ", which was freed." +
                 rt::site_lines(*a),
             pc);
      return nullptr;
    }
    const size_t extent = a->device >= 0 ? a->dev_bytes : a->bytes;
    char* const lo = rt::with_tag(a->base, a->dev_tag);  // in the view its kernels' pointers use
    regions.push_back(Region{lo, lo + std::max<size_t>(extent, 1), a, nullptr});
    if (!argument_points_into(regions.back()))
      report(kOutOfBounds,
             who(block, thread) + " accesses " + std::to_string(bytes) + " byte(s) at " + where(regions.back(), p) +
                 ", which none of the kernel's " + std::to_string(spec->nargs) +
                 " pointer argument(s) points into: an index that ran past its own allocation, over the guard "
                 "zone or padding, into another (or a pointer the kernel read from memory; "
                 "VGPU_ARGUMENT_CHECK=0 allows those)." +
                 rt::site_lines(*a),
             pc);
    return last = &regions.back();
  }
  if ((a = rt::find_near_locked(p))) {
    const char* end = a->base + (a->device >= 0 ? a->dev_bytes : a->bytes);
    const char* q = rt::untag(p);
    report(kOutOfBounds,
           who(block, thread) + " accesses " + std::to_string(bytes) + " byte(s) at " +
               (q < a->base ? std::to_string(a->base - q) + " byte(s) before the start of "
                            : std::to_string(q - end) + " byte(s) past the end of ") +
               rt::describe_record(*a) + "." + rt::site_lines(*a),
           pc);
    return nullptr;
  }
  if (rt::in_device_arena(p)) {  // device memory's range, but no allocation's: the rest of a page
    report(kOutOfBounds,
           who(block, thread) + " accesses " + std::to_string(bytes) +
               " byte(s) of device memory that no allocation holds (beyond the guard zones of the "
               "allocation before it).",
           pc);
    return nullptr;
  }
  // Host memory (constants, host data a parameter points into): remembered by page, or by line
  // where the page also holds part of an allocation or its guard zones.
  auto device_within = [](uintptr_t lo, uintptr_t n) {
    auto& by_base = rt::registry().by_base;
    auto it = by_base.upper_bound(lo + n + kGuardSlack);
    for (int i = 0; i < 4 && it != by_base.begin(); ++i) {
      const auto* r = (--it)->second;
      if (reinterpret_cast<uintptr_t>(r->raw) < lo + n && reinterpret_cast<uintptr_t>(r->raw + r->raw_bytes) > lo)
        return true;
    }
    return false;
  };
  if (!device_within(page << 12, 4096))
    host_pages.insert(page);
  else if (!device_within(line << 6, 64))
    host_lines.insert(line);
  return nullptr;
}

void AccessTracker::Impl::check_device(const Region& g, const char* p, size_t bytes, unsigned flags,
                                       const void* pc) {
  rt::AllocRecord& a = *g.rec;
  if (!a.init) return;  // pinned host memory: no initialisation shadow
  const size_t lo = static_cast<size_t>(p - g.lo), hi = lo + bytes;
  std::atomic<uint64_t>* w = a.init.get();
  const bool reads = !(flags & kWrite) || (flags & kAtomic);  // an atomic read-modify-write reads too
  rt::for_each_init_word(lo, hi, [&](size_t word, uint64_t mask) {
    const uint64_t have = w[word].load(std::memory_order_relaxed);
    if ((have & mask) == mask) return true;
    if (reads && !found[kUninitialized]) {
      const size_t first = word * 64 + static_cast<size_t>(__builtin_ctzll(~have & mask));
      report(kUninitialized,
             who(block, thread) + " reads " + std::to_string(bytes) + " byte(s) at " + where(g, p) +
                 ", which nothing has written since cudaMalloc (byte " + std::to_string(first) +
                 " is unwritten; cudaMalloc does not initialise memory, and a caching allocator's block holds "
                 "whatever its last tensor left)." +
                 rt::site_lines(a),
             pc);
    }
    if (flags & kWrite) w[word].fetch_or(mask, std::memory_order_relaxed);
    return true;
  });
}

void AccessTracker::access(const void* ptr, size_t bytes, unsigned flags, const void* pc) {
  Impl& m = *impl_;
  if (bytes == 0) return;
  const char* p = static_cast<const char*>(ptr);
  const uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  m.thread = thread;
  const Region* g = m.find(p, bytes, pc);
  if (!g) return;
  m.any = true;
  if (g->shared) m.shared_used[static_cast<size_t>(g - m.shared_vars.data())] = true;
  if (p + bytes > g->hi) {
    m.report(kOutOfBounds,
             m.who(m.block, thread) + " " + ((flags & kWrite) ? "writes " : "reads ") + std::to_string(bytes) +
                 " byte(s) at " + m.where(*g, p) + ", which run " + std::to_string(p + bytes - g->hi) +
                 " byte(s) past its end." + (g->rec ? rt::site_lines(*g->rec) : std::string()),
             pc);
    bytes = static_cast<size_t>(g->hi - p);
  }
  if (g->rec) m.check_device(*g, p, bytes, flags, pc);
  m.check_race(*g, p, bytes, flags, pc, block_epoch_);
}

void AccessTracker::Impl::check_race(const Region& g, const char* p, size_t bytes, unsigned flags, const void* pc,
                                     uint32_t epoch) {
  const bool write = flags & kWrite, atomic = flags & kAtomic;
  Acc cur;
  const uint32_t blk = static_cast<uint32_t>(block);
  cur.block = blk;
  cur.thread = static_cast<uint16_t>(thread);
  cur.epoch = epoch;
  cur.wepoch = wepoch[thread >> 5];
  cur.atomic = atomic;
  cur.pc = pc;
  // Whether `prev` happens before the current access: the same thread, or the same block with a
  // __syncthreads in between, or the same warp with a warp synchronisation in between.
  auto ordered = [&](const Acc& prev) {
    if (prev.block != blk) return false;
    if (prev.thread == thread || prev.epoch < epoch) return true;
    return (prev.thread >> 5) == (thread >> 5) && prev.wepoch < cur.wepoch;
  };
  const bool shared = g.shared != nullptr;
  const uintptr_t a0 = reinterpret_cast<uintptr_t>(p), a1 = a0 + bytes;
  for (uintptr_t gran = a0 & ~uintptr_t{3}; gran < a1; gran += 4) {
    const uintptr_t lo = std::max(gran, a0), hi = std::min(gran + 4, a1);
    cur.mask = static_cast<uint8_t>(((1u << (hi - lo)) - 1) << (lo - gran));
    Cell& c = cells.at(gran);
    if (shared) {  // shared memory is the block's own: what an earlier block did there is gone
      if (c.has_w && c.w.block != blk) c.has_w = false;
      c.drop_reads_if([blk](const Acc& r) { return r.block != blk; });
    }
    auto conflicts = [&](bool has, const Acc& prev) {
      return has && (prev.mask & cur.mask) && !(prev.atomic && atomic) && !ordered(prev);
    };
    const Acc* other = nullptr;
    const char* what = nullptr;
    if (conflicts(c.has_w, c.w)) {
      other = &c.w;
      what = write ? "write-write" : "read-after-write";
    } else if (write) {
      for (unsigned i = 0; i < c.nr && !other; ++i)
        if (conflicts(true, c.r[i])) {
          other = &c.r[i];
          what = "write-after-read";
        }
    }
    if (other && !found[kRace]) {
      const char* mem = reinterpret_cast<const char*>(gran) + __builtin_ctz(cur.mask & other->mask);
      const bool cross = other->block != blk;
      report(kRace,
             std::string(what) + " hazard on " + where(g, mem) + ": " + who(block, thread) + " " +
                 (write ? "writes" : "reads") + (atomic ? " (atomically)" : "") + " it, and " +
                 who(other->block, other->thread) + " " + (other == &c.w ? "wrote" : "read") +
                 (other->atomic ? " (atomically)" : "") + " it " +
                 (cross ? "in another block of the same launch: blocks run in no defined order"
                        : "with no __syncthreads() between them" +
                              std::string((other->thread >> 5) == (thread >> 5) ? " and no warp synchronisation"
                                                                                   : "")) +
                 ". Conflicting accesses need a barrier between them, or atomics (CUDA C++ Programming Guide, "
                 "Memory Fence Functions and Synchronization Functions; compute-sanitizer racecheck).",
             pc, other->pc);
    } else if (other) {
      report(kRace, "", pc);
    }
    if (write) {
      c.w = cur;
      c.has_w = true;
      c.nr = 0;
    } else {
      remember_read(c, cur, ordered);
    }
  }
}

// Adds a read to the cell's reads (Cell): reads of its block ordered before it go; a block's
// third unordered read replaces the older one that it covers (else the oldest); a third block's
// read is kept only when the two blocks kept do not both cover its bytes, in place of the block
// whose reads cover the fewest.
template <class Ordered>
void AccessTracker::Impl::remember_read(Cell& c, const Acc& cur, const Ordered& ordered) {
  c.drop_reads_if([&](const Acc& r) { return r.block == cur.block && ordered(r); });
  const auto mine = [&](const Acc& r) { return r.block == cur.block; };
  const auto n_mine = std::count_if(c.r, c.r + c.nr, mine);
  if (n_mine >= Cell::kPerBlock) {
    // The last of its block's reads whose bytes it covers, else its block's oldest.
    const Acc* victim = std::find_if(c.r, c.r + c.nr, mine);
    for (const Acc* r = victim; r != c.r + c.nr; ++r)
      if (mine(*r) && (r->mask & ~cur.mask) == 0) victim = r;
    c.drop_reads_if([victim](const Acc& r) { return &r == victim; });
  } else if (n_mine == 0) {
    uint32_t blocks[Cell::kReads];
    uint8_t masks[Cell::kReads];
    unsigned nb = 0;
    for (unsigned i = 0; i < c.nr; ++i) {
      unsigned k = 0;
      while (k < nb && blocks[k] != c.r[i].block) ++k;
      if (k == nb) blocks[nb] = c.r[i].block, masks[nb++] = 0;
      masks[k] |= c.r[i].mask;
    }
    if (nb >= Cell::kBlocks) {
      if ((masks[0] & cur.mask) == cur.mask && (masks[1] & cur.mask) == cur.mask) return;  // covered twice
      const uint32_t gone = __builtin_popcount(masks[0]) <= __builtin_popcount(masks[1]) ? blocks[0] : blocks[1];
      c.drop_reads_if([gone](const Acc& r) { return r.block == gone; });
    }
  }
  c.r[c.nr++] = cur;
}

}  // namespace vgpu::kernel
