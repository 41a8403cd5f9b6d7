// Every load and store of a kernel, checked at its real address (vgpu/README.md, "Kernel memory
// accesses"). The CUDA sources of a vgpu build are compiled with GCC's ThreadSanitizer
// instrumentation but linked without its runtime: each load, store and atomic calls a __tsan_*
// entry point, which access_hooks.cpp defines and forwards here while a kernel runs. Per launch:
//   - bounds: device memory outside the allocation's exact extent (the guard zones, a neighbour)
//   - use after free, and reads of device memory that nothing has written (the init shadow,
//     which a kernel's writes now mark byte by byte)
//   - races between the kernel's own threads, in global and shared memory (racecheck): two
//     accesses to a byte, one a write, not both atomic, by threads that no __syncthreads (same
//     block) or warp synchronisation (same warp) orders. Blocks of one launch are never ordered.
//   - provenance: an access through a pointer with another allocation's tag (runtime/arena.h: an
//     index that ran into another allocation, or a stale pointer of the memory's earlier user),
//     or to an allocation that none of the launch's pointer arguments points into (an index that
//     jumped a guard zone into a neighbour); VGPU_ARGUMENT_CHECK=0 turns the latter off, for
//     kernels that follow pointers stored in device memory
// VGPU_ACCESS_CHECK=0 turns the checks off (the hooks then cost a thread-local load each); =once
// checks each distinct launch once (access_check_launch).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace vgpu::detail {
struct KernelSpec;
}

namespace vgpu::kernel {

class StackPool;
bool argument_check_enabled();
enum AccessFlag : unsigned { kRead = 0, kWrite = 1, kAtomic = 2 };

class AccessTracker {
 public:
  AccessTracker();
  ~AccessTracker();
  AccessTracker(const AccessTracker&) = delete;
  AccessTracker& operator=(const AccessTracker&) = delete;

  // Around one grid on this thread; end() says whether the kernel made any tracked access (its
  // code is instrumented: then what it wrote is marked initialised exactly, as it happened).
  void begin(const detail::KernelSpec& spec, const void* closure, const StackPool& stacks, uint32_t warps);
  bool end();
  void begin_block(uint64_t linear_block);
  void barrier_done() { ++block_epoch_; }
  void warp_done(uint32_t warp);

  void access(const void* p, size_t bytes, unsigned flags, const void* pc);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint32_t block_epoch_ = 0;
};

// The bytes an instrumented kernel stores, and the device or pinned bytes it loads, logged by the
// hooks whether or not the checks are on: what the race checker learns a launch wrote and read
// (kernel/launch.cpp), exactly and without comparing a snapshot of each written argument. Runs of
// addresses less than kGap bytes apart are merged (a kernel's accesses are dense or strided;
// row-sparse ones need not be one record per row).
class AccessLog {
 public:
  static constexpr size_t kGap = 256;
  void clear() {
    runs_.clear();
    compact_at_ = kCompactAt;
  }
  bool empty() const { return runs_.empty(); }
  // The common case inline: after or inside one of the last kRecent runs (a thread that stores
  // to several arrays in turn, as AdamW's p, m and v, extends one run per array).
  static constexpr size_t kRecent = 4;
  void add(const void* p, size_t bytes) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const size_t n = runs_.size(), stop = n > kRecent ? n - kRecent : 0;
    for (size_t i = n; i-- > stop;) {
      auto& r = runs_[i];
      if (a >= r.first && a <= r.second + kGap) {
        if (a + bytes > r.second) r.second = a + bytes;
        return;
      }
    }
    start_run(a, bytes);
  }
  void finish();  // sorts and merges the runs
  // Not after one of the last runs: after a run that ends near it (the slot of the address's
  // kGap-sized bucket, or the one before, names the run that last ended there: the next element
  // of an array whose run was left several runs ago, as a grid-stride kernel's next thread
  // meets it), else a new run. The runs are sorted and merged whenever their number has doubled
  // (at least kCompactAt): strided loads (a block's threads each loading every blockDim-th
  // element of a tile, one thread after another) and the same tiles read by every block start a
  // run per load that only the merge joins. Merging early gives the same runs as merging once at
  // the end; a slot naming a moved run only misses.
  [[gnu::noinline]] void start_run(uintptr_t a, size_t bytes) {
    for (uintptr_t bucket : {a / kGap, a / kGap - 1}) {
      const uint32_t i = slot_[bucket % kSlots];
      if (i >= runs_.size()) continue;
      auto& r = runs_[i];
      if (a >= r.first && a <= r.second + kGap) {
        if (a + bytes > r.second) {
          r.second = a + bytes;
          slot_[(r.second / kGap) % kSlots] = i;
        }
        return;
      }
    }
    if (runs_.size() >= compact_at_) {
      finish();
      compact_at_ = std::max(kCompactAt, 2 * runs_.size());
    }
    runs_.emplace_back(a, a + bytes);
    slot_[((a + bytes) / kGap) % kSlots] = static_cast<uint32_t>(runs_.size() - 1);
  }
  // After finish(): the runs within [base, base + bytes), as offsets from base.
  std::vector<std::pair<size_t, size_t>> within(const void* base, size_t bytes) const;

 private:
  static constexpr size_t kCompactAt = 4096;
  static constexpr size_t kSlots = 4096;
  std::vector<std::pair<uintptr_t, uintptr_t>> runs_;
  size_t compact_at_ = kCompactAt;
  std::array<uint32_t, kSlots> slot_{};  // a run index per bucket (hashed), checked before use
};

// The logs of the grid running on this thread (the executor's), null outside kernels.
extern constinit thread_local AccessLog* t_write_log __attribute__((tls_model("initial-exec")));
extern constinit thread_local AccessLog* t_read_log __attribute__((tls_model("initial-exec")));

// Whether the checks are on (vgpu::set_access_checks, else VGPU_ACCESS_CHECK, default 1).
bool access_checks_enabled();
// Whether this launch is checked: with the checks on, every launch; under VGPU_ACCESS_CHECK=once
// only the first of each distinct launch of the process (same kernel, site, grid, block, shared
// memory, parameter values, and each pointer argument's allocation size, offset and aliasing:
// launch_identity in access_check.cpp): the repeated steps of a training run are
// checked once. A data-dependent fault (an index read from memory) that only a repeat meets is
// missed then; the kernel tests run with every launch checked.
bool access_check_launch(const detail::KernelSpec& spec);

// An instrumented access outside any kernel that lands in device or pinned memory
// (runtime/arena.h): the host dereferencing a device pointer is reported; for pinned memory, the
// race checker reports the host reading bytes that a stream's unsynchronised work writes, or
// writing bytes it reads. Unless this thread is the vgpu's own (a stream worker, which copies
// device memory on the runtime's behalf and runs host functions in stream order).
// `via` names the C library function that made the access (memcpy: kernel/host_copies.cpp).
void host_access(const void* p, size_t bytes, unsigned flags, const void* pc, const char* via = nullptr);
extern constinit thread_local bool t_vgpu_thread __attribute__((tls_model("initial-exec")));

// The tracker of the grid running on this thread, null outside kernels and with the checks off.
extern constinit thread_local AccessTracker* t_access_tracker __attribute__((tls_model("initial-exec")));

}  // namespace vgpu::kernel
