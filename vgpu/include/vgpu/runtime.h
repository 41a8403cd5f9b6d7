// The virtual GPU's internal services: what the CUDA runtime subset (src/runtime) offers to the
// kernel executor (src/kernel), the cuBLASLt subset (src/cublas) and the NCCL subset (src/nccl).
// Product code never includes this header; tests of the harness may.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vgpu {

// ---- Violations: misuse the vgpu detects (out-of-bounds, race, barrier divergence, mismatched
// collectives, use after abort...). By default one block is printed to stderr, beginning
// "vgpu: <kind>:", and the process aborts, so no test can pass through one. Harness tests
// capture them instead (CaptureViolations); then report_violation returns and the caller goes on
// as the real library would (an error code, a sticky error, a stopped kernel).
void report_violation(const std::string& kind, const std::string& message);

// Host code cannot read or write device memory (src/runtime/protect.h): an access faults and is
// reported as `host access to device memory`. A test helper that touches device memory on purpose
// (to set up or inspect a planted state) holds one of these on its thread meanwhile.
class HostTouchesDeviceMemory {
 public:
  HostTouchesDeviceMemory();
  ~HostTouchesDeviceMemory();
  HostTouchesDeviceMemory(const HostTouchesDeviceMemory&) = delete;
  HostTouchesDeviceMemory& operator=(const HostTouchesDeviceMemory&) = delete;

 private:
  void* access_;
};
// The protection in use: "pkeys", "mprotect" or "off" (VGPU_PROTECT; "off" before the first cudaMalloc).
const char* device_memory_protection();

class CaptureViolations {  // while one exists (process-wide), violations are collected, not fatal
 public:
  CaptureViolations();
  ~CaptureViolations();
  CaptureViolations(const CaptureViolations&) = delete;
  CaptureViolations& operator=(const CaptureViolations&) = delete;
  std::vector<std::string> messages() const;  // "kind: message", in order
};

// ---- Where a call came from: an API name plus file:line where known (kernel launches through
// PTDP_LAUNCH), else a backtrace of the host thread taken at the call and symbolised only when
// a report needs it.
struct Site {
  std::string what;          // "kernel gelu_forward_kernel<T>", "cudaMemcpyAsync", "ncclAllReduce"
  const char* file = nullptr;
  int line = 0;
  std::vector<void*> frames;  // filled by capture_site()
  std::string describe() const;  // one or more lines for a report
};
Site capture_site(std::string what, const char* file = nullptr, int line = 0);
// The per-access checks of instrumented kernels (src/kernel/access_check.h): on unless
// VGPU_ACCESS_CHECK=0; a test may turn them off for its own launches (kernels already running
// keep the setting they started with). Once (VGPU_ACCESS_CHECK=once): only the first of each
// distinct launch is checked (same kernel, site, grid, block, parameters, and for each pointer
// argument its allocation's size, its offset there and its aliasing); setting it starts afresh.
enum class AccessChecks { Off = 0, Every = 1, Once = 2 };
void set_access_checks(bool on);
void set_access_checks(AccessChecks mode);
bool access_checks();
// The executable's __shared__ variables that no red zone follows, by name: an index past one of
// them may land in the next variable unseen. device.h declares a red zone before each variable;
// GCC lays out an instrumented file's thread-locals in reverse, so it follows the variable, while
// a file compiled without the instrumentation may be laid out forward, its last variable then
// unguarded.
std::vector<std::string> unguarded_shared_variables();

// "file:line (function)" of a code address, from the binary's line table (addr2line) where it has
// one, else "function+0x1f (binary)"; for reports of single instructions (a kernel's load).
std::string describe_code_address(const void* pc);

// ---- Device memory registry. cudaMalloc'd memory is host memory with guard zones before and
// after (a fill pattern checked after every operation that touched the allocation, at free and
// at synchronisation); cudaMallocHost memory is registered as pinned host memory.
struct AllocInfo {
  char* base = nullptr;   // first user byte
  size_t bytes = 0;       // user size
  int device = -1;        // -1: pinned host memory
  uint64_t id = 0;        // unique per allocation, never reused
};
std::optional<AllocInfo> find_allocation(const void* p);  // the allocation containing p (device or pinned)
// Reports a violation unless [p, p + bytes) lies inside one device allocation (pinned host
// memory too when allow_pinned). `what` names the operand ("cublasLtMatmul A", "ncclSend buffer").
bool check_range(const void* p, size_t bytes, const std::string& what, bool allow_pinned = false);
// For reports about a pointer that no live allocation contains: "" when it is nowhere known,
// else a sentence naming the allocation it was freed from (*freed set: cudaFree'd, or a tensor
// given back to its caching allocator) or whose guard zone or padding it lies in, with its sites.
std::string explain_pointer(const void* p, bool* freed);
// Guard-zone check of the allocation containing p (no-op for unknown pointers); reports overruns.
void check_guards(const void* p, const std::string& after_what);
// Initialisation shadow: bytes written by a copy, memset, kernel, GEMM or collective are
// initialised; a copy, GEMM or collective reading uninitialised device memory is reported.
void mark_initialized(const void* p, size_t bytes);
void check_initialized(const void* p, size_t bytes, const std::string& what);

// ---- Streams and ordering. Each stream has one worker thread that runs its work in order.
// A null stream means the legacy default stream of the current device.
cudaStream_t resolve_stream(cudaStream_t s);
int current_device();
int stream_device(cudaStream_t s);

enum class Access { Read, Write };
struct Range {
  const void* ptr;
  size_t bytes;
  Access access;
};

// Queues `work` on stream s. The race checker records `ranges` at this point, in the host's
// program order: a range used on another stream (or by the host) without an ordering event or
// synchronisation between the two is reported with both sites. `work` runs on the stream's
// worker; a non-success return becomes the stream's error (sticky for cudaErrorIllegalAddress,
// as on a GPU), reported by the next synchronisation or query. After it runs, the guard zones
// of the allocations in `ranges` are checked.
// `self_contained`: the work waits on nothing another thread does (a kernel, a product; not a
// collective): queued on an idle stream, it may run on the calling thread before enqueue returns
// (vgpu/README.md, "Streams").
void enqueue(cudaStream_t s, Site site, std::vector<Range> ranges, std::function<cudaError_t()> work,
             bool self_contained = false);

// Where a queued item stands in the race checker's order (filled by enqueue_stamped when the
// checker is on): lets work that learns its real extent while it runs (a kernel, whose pointer
// arguments say where its accesses start, not where they end) add it afterwards.
struct RaceStamp;
// As enqueue, and fills `stamp` (made by new_race_stamp) before the work can run.
std::shared_ptr<RaceStamp> new_race_stamp();
void enqueue_stamped(cudaStream_t s, Site site, std::vector<Range> ranges, std::function<cudaError_t()> work,
                     const std::shared_ptr<RaceStamp>& stamp, bool self_contained = false);
// Whether `stamp` was filled (the race checker is on).
bool race_stamp_filled(const RaceStamp& stamp);
// From the work of a stamped item: the bytes [p + lo, p + hi) of each run changed while it ran.
// Less what unordered writers of other streams declared in that allocation, they are its writes:
// checked against every recorded access of another stream ordered neither before nor after the
// item, then recorded.
void race_record_written(const RaceStamp& stamp, const void* p, const std::vector<std::pair<size_t, size_t>>& runs);
// From the work of a stamped item: it read (`write` false) or wrote exactly the bytes
// [p + lo, p + hi) of each run (an instrumented kernel's loads and stores). Checked like
// race_record_written's, without leaving out anything, then recorded.
void race_record_accessed(const RaceStamp& stamp, const void* p, const std::vector<std::pair<size_t, size_t>>& runs,
                          bool write);

// Marks that the host thread now observes everything queued on s so far (as cudaStreamSynchronize
// does), for the race checker; used by libraries that wait for a stream themselves.
void host_observes_stream(cudaStream_t s);

// The error that the most recent runtime call of this host thread returns and that
// cudaGetLastError then clears; libraries built on the runtime set it for launch failures.
void set_last_error(cudaError_t e);

// Number of virtual devices: VGPU_DEVICES (default 8; 0 behaves as a machine without a GPU).
int device_count();

// ---- Additions by the runtime part (not in the original contract) ----
// Events created and not yet destroyed (cudaEventCreate* minus cudaEventDestroy), process-wide:
// tests check that code under test does not leak events.
size_t live_events();
// Test-only: overrides VGPU_DEVICES (n >= 0), or re-reads it (n < 0). Only between tests, with
// no stream work pending.
void set_device_count_for_testing(int n);
// Test-only: waits for the device's streams, then clears its sticky error and the streams'
// pending errors, so harness tests can plant a fault (cudaErrorIllegalAddress...) and go on. A
// real process must terminate to recover from a sticky error.
void reset_device_for_testing(int device);

}  // namespace vgpu
