// Kernel launches (vgpu/launch.h): the checks made at the launch, on the host thread, and the
// queueing of the grid on the stream's worker through vgpu::enqueue.
#include <cstring>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernel/executor.h"

namespace vgpu::detail {
namespace {

std::string dims(dim3 d) {
  std::string s = "(";
  s += std::to_string(d.x);
  s += ',';
  s += std::to_string(d.y);
  s += ',';
  s += std::to_string(d.z);
  return s + ')';
}

// Launch limits of every device of compute capability 5.0 and later (CUDA C++ Programming Guide,
// Compute Capabilities, Table "Technical Specifications"): at most 1024 threads per block,
// block dimensions x, y <= 1024 and z <= 64, grid dimensions x <= 2^31-1 and y, z <= 65535, and
// 48 KiB of shared memory per block without an opt-in attribute. Violating them fails the launch
// with cudaErrorInvalidConfiguration ("a kernel launch is requesting resources that can never be
// satisfied by the current device", CUDA Runtime API, cudaError).
const char* invalid_configuration(const KernelSpec& s) {
  const dim3 b = s.block, g = s.grid;
  if (b.x == 0 || b.y == 0 || b.z == 0) return "a block dimension is 0";
  if (g.x == 0 || g.y == 0 || g.z == 0) return "a grid dimension is 0";
  if (b.x > 1024 || b.y > 1024 || b.z > 64) return "a block dimension exceeds (1024, 1024, 64)";
  if (uint64_t(b.x) * b.y * b.z > 1024) return "the block has more than 1024 threads";
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) return "a grid dimension exceeds (2^31-1, 65535, 65535)";
  if (s.shmem > 48 * 1024) return "the dynamic shared memory exceeds 48 KiB";
  return nullptr;
}

std::string operand(const KernelSpec& spec, const PointerArg& p) {
  std::string s = "argument #" + std::to_string(p.arg);
  if (p.field) s += " (field #" + std::to_string(p.field) + ")";
  return s;
}

// Larger written allocations are not snapshot (for a kernel without the instrumentation their
// extent stays the first byte).
constexpr size_t kMaxSnapshotBytes = size_t(256) << 20;

// The runs of bytes that differ between `before` and `now` (its length), runs closer than
// AccessLog::kGap merged, as the write log merges them: a kernel's writes are dense or strided,
// and row-sparse ones (embedding gradients) need not be one record per row.
std::vector<std::pair<size_t, size_t>> changed_runs(const std::vector<unsigned char>& before,
                                                    const unsigned char* now) {
  std::vector<std::pair<size_t, size_t>> runs;
  const size_t n = before.size();
  const unsigned char* b = before.data();
  for (size_t i = 0; i < n;) {
    // Equal stretches (most of an allocation: a kernel writes one tensor of a cached block) are
    // skipped with memcmp a block at a time, not byte by byte; the runs found are the same.
    for (size_t blk : {size_t(4096), size_t(64)})
      while (i + blk <= n && std::memcmp(b + i, now + i, blk) == 0) i += blk;
    if (i >= n) break;
    if (b[i] == now[i]) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && before[j] != now[j]) ++j;
    if (!runs.empty() && i - runs.back().second < kernel::AccessLog::kGap) runs.back().second = j;
    else runs.emplace_back(i, j);
    i = j;
  }
  return runs;
}

}  // namespace

void submit_launch(const KernelSpec& spec, cudaStream_t stream, const std::vector<PointerArg>& pointers,
                   std::shared_ptr<const void> closure, ThreadBody body) {
  if (invalid_configuration(spec)) {
    set_last_error(cudaErrorInvalidConfiguration);  // nothing is queued, as on a GPU
    return;
  }
  // Each pointer argument: the rest of its allocation, read through a pointer to const, else
  // written. Kernels can dereference device memory and (mapped) pinned host memory only.
  int device = -2;  // looked up once a device pointer needs it
  std::vector<Range> ranges;
  struct Written {
    Range range;
    bool learn;  // device memory: its extent is learnt when the kernel has run
  };
  std::vector<Written> written;
  // Per allocation, from its lowest argument on: where an instrumented kernel's logged loads and
  // stores are looked for.
  struct Touched {
    uint64_t id;
    Range range;
  };
  std::vector<Touched> touched;
  std::vector<const void*> args;  // where the kernel's accesses may go (kernel/access_check.h)
  bool ok = true;
  for (const PointerArg& p : pointers) {
    if (!p.ptr) continue;
    args.push_back(p.ptr);
    const std::optional<AllocInfo> a = find_allocation(p.ptr);
    if (!a) {
      // One past the end of an allocation is a valid pointer (an end marker, or the data of an
      // empty tensor): only dereferencing it would fault, and the guard zones catch that.
      const std::optional<AllocInfo> before = find_allocation(static_cast<const char*>(p.ptr) - 1);
      if (before && before->base + before->bytes == static_cast<const char*>(p.ptr)) continue;
      bool freed = false;
      const std::string where = explain_pointer(p.ptr, &freed);
      report_violation(freed ? "use after free" : "invalid kernel argument",
                       kernel::describe_kernel(spec) + " " + operand(spec, p) +
                           " is not device memory (a host pointer, or freed): a kernel can only access memory "
                           "from cudaMalloc or cudaMallocHost (CUDA C++ Programming Guide, Device Memory)." +
                           (where.empty() ? "" : " " + where));
      ok = false;
      continue;
    }
    if (a->device >= 0 && device == -2) device = stream_device(stream);
    if (a->device >= 0 && device >= 0 && a->device != device) {
      report_violation("invalid kernel argument",
                       kernel::describe_kernel(spec) + " " + operand(spec, p) + " is memory of device " +
                           std::to_string(a->device) + ", but the kernel runs on device " + std::to_string(device) +
                           " and peer access is not enabled (CUDA C++ Programming Guide, Peer-to-Peer Memory "
                           "Access).");
      ok = false;
      continue;
    }
    const size_t rest = static_cast<size_t>(a->base + a->bytes - static_cast<const char*>(p.ptr));
    ranges.push_back(Range{p.ptr, rest, p.read_only ? Access::Read : Access::Write});
    auto same = std::find_if(touched.begin(), touched.end(), [&](const Touched& t) { return t.id == a->id; });
    if (same == touched.end()) touched.push_back(Touched{a->id, ranges.back()});
    else if (rest > same->range.bytes) same->range = ranges.back();
    // An instrumented kernel marks the bytes it stores as initialised itself (access_check.h);
    // for one without the instrumentation each written argument's rest counts as initialised once
    // it has run. In device memory, which only streams write, what changed is what the kernel wrote.
    if (!p.read_only) written.push_back(Written{ranges.back(), a->device >= 0});
  }
  // For the race checker a kernel argument is first the byte it points at: where a kernel's
  // accesses end is unknown at the launch (a grid-stride loop over n elements, a view into a
  // larger buffer such as the flat gradient buffer whose other buckets NCCL reduces meanwhile),
  // but a kernel that uses its buffer touches where the pointer points. What the kernel really
  // wrote is learnt when it runs, in the rest of each written argument's allocation: the bytes
  // its instrumented code stored (kernel::AccessLog), or for code without the instrumentation the
  // bytes that changed (a snapshot taken just before); added to the checker afterwards and checked
  // then (race_record_accessed, race_record_written). Its instrumented loads are learnt the same
  // way (kernel::last_grid_reads). For uninstrumented kernels reads past the first byte stay
  // unseen, and writes of a value already there (docs/CUDA.md). The guard zones of the whole
  // allocation are checked after the kernel.
  for (Range& r : ranges) r.bytes = 1;

  Site site = capture_site(std::string("kernel ") + spec.name + " <<<" + dims(spec.grid) + ", " + dims(spec.block) +
                               ">>>",
                           spec.file, spec.line);
  std::shared_ptr<RaceStamp> stamp = new_race_stamp();
  enqueue_stamped(
      stream, std::move(site), std::move(ranges),
      [spec, closure = std::move(closure), body, ok, written = std::move(written), touched = std::move(touched),
       args = std::move(args), stamp]() -> cudaError_t {
        if (!ok) return cudaErrorLaunchFailure;  // reported at the launch; the kernel does not run
        KernelSpec run_spec = spec;
        run_spec.args = args.data();
        run_spec.nargs = args.size();
        const bool learn = race_stamp_filled(*stamp);
        // An instrumented kernel logs its stores (kernel::AccessLog); one whose earlier launch from
        // the same site on this worker logged some needs no snapshot (instrumentation is per
        // source file, and a launch site's kernels are its file's). Until then, and for kernels
        // without the instrumentation, the written arguments are compared with a snapshot.
        thread_local std::set<std::tuple<const char*, int, const char*>> logs_its_writes;
        const auto site_key = std::make_tuple(spec.file, spec.line, spec.name);
        const bool logged = logs_its_writes.count(site_key) != 0;
        std::vector<std::vector<unsigned char>> before(written.size());
        std::vector<bool> snapshot(written.size(), false);
        for (size_t i = 0; i < written.size(); ++i)
          if (learn && written[i].learn && !logged && written[i].range.bytes <= kMaxSnapshotBytes) {
            const auto* p = static_cast<const unsigned char*>(written[i].range.ptr);
            before[i].assign(p, p + written[i].range.bytes);
            snapshot[i] = true;
          }
        const cudaError_t e = kernel::run_grid(run_spec, body, closure.get());
        if (e != cudaSuccess) return e;
        const bool exact = kernel::last_grid_tracked();  // the kernel's writes marked themselves
        const kernel::AccessLog& log = kernel::last_grid_writes();
        const kernel::AccessLog& reads = kernel::last_grid_reads();
        if (!log.empty()) logs_its_writes.insert(site_key);
        const bool instrumented = !log.empty() || !reads.empty() || logged;
        for (size_t i = 0; i < written.size(); ++i) {
          const Range& r = written[i].range;
          if (!exact) mark_initialized(r.ptr, r.bytes);
          if (learn && written[i].learn && !instrumented && snapshot[i])
            race_record_written(*stamp, r.ptr, changed_runs(before[i], static_cast<const unsigned char*>(r.ptr)));
        }
        if (learn && instrumented)
          for (const Touched& t : touched) {
            race_record_accessed(*stamp, t.range.ptr, reads.within(t.range.ptr, t.range.bytes), /*write=*/false);
            race_record_accessed(*stamp, t.range.ptr, log.within(t.range.ptr, t.range.bytes), /*write=*/true);
          }
        return e;
      },
      stamp, /*self_contained=*/true);
}

}  // namespace vgpu::detail
