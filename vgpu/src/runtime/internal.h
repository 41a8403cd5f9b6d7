// Internal state of the vgpu CUDA runtime (src/runtime): per-thread state, devices, streams,
// events and the pieces the race checker shares with them. Not for use outside src/runtime.
#pragma once
#include <vgpu/runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vgpu {
namespace rt {

// A vector clock over race-checker agents (slot 0: the host; other slots: streams).
struct VClock {
  std::vector<uint64_t> v;
  uint64_t get(uint32_t a) const { return a < v.size() ? v[a] : 0; }
  void set(uint32_t a, uint64_t e) {
    if (a >= v.size()) v.resize(a + 1, 0);
    v[a] = e;
  }
  void join(const VClock& o) {
    if (o.v.size() > v.size()) v.resize(o.v.size(), 0);
    for (size_t i = 0; i < o.v.size(); ++i) v[i] = std::max(v[i], o.v[i]);
  }
};

}  // namespace rt

// An item's place in the race checker's order: its stream's agent, its epoch, the stream's clock
// at submission (what is ordered before it), the site that queued it.
struct RaceStamp {
  bool filled = false;
  uint32_t agent = 0;
  uint64_t epoch = 0;
  const StreamImpl* stream = nullptr;
  std::shared_ptr<const rt::VClock> clock;
  std::shared_ptr<const Site> site;
};

namespace rt {

// One entry of a stream's FIFO: work to run, or a wait for another stream's item, or an event
// record (the worker stamps the event's time).
struct Item {
  std::function<cudaError_t()> work;
  StreamImpl* wait_stream = nullptr;  // wait item: until wait_stream->completed >= wait_seq
  uint64_t wait_seq = 0;
  EventImpl* record = nullptr;  // record item: holds a reference to the event
  uint64_t record_gen = 0;
  std::shared_ptr<const Site> site;
  std::vector<Range> ranges;  // guard zones checked after the work ran
  std::shared_ptr<RaceStamp> stamp;  // filled by the race checker at submission (enqueue_stamped)
  bool self_contained = false;  // waits on no other agent: may run on the submitting thread
  bool through_view0 = false;   // touches device memory only through view 0 (a copy, a memset): opens nothing
  bool claimed = false;         // running on the submitting thread: the worker leaves it alone
};

// Per host thread: current device, last error, whether it runs a cudaLaunchHostFunc callback.
struct ThreadState {
  int device = 0;
  cudaError_t last = cudaSuccess;
  bool in_host_fn = false;
};
ThreadState& thread_state();

// Returns e, recording it as the calling thread's last error when it is not cudaSuccess
// (CUDA: "returns the last error that has been produced by any of the runtime calls").
cudaError_t ret(cudaError_t e);

constexpr int kMaxDevices = 64;
struct DeviceState {
  std::atomic<int> sticky{0};  // a cudaError_t once the context is corrupted
  std::mutex mu;               // guards legacy and streams
  StreamImpl* legacy = nullptr;
  std::vector<StreamImpl*> streams;  // every stream of the device whose worker still runs
};
DeviceState& device_state(int dev);
bool is_sticky(cudaError_t e);
void make_sticky(int dev, cudaError_t e);
// cudaErrorNoDevice / cudaErrorInvalidDevice / the device's sticky error / cudaSuccess.
cudaError_t device_error(int dev);
// The same for the calling thread's current device.
cudaError_t context_error();

// Streams (stream.cpp).
StreamImpl* legacy_stream(int dev);
// Validates a user stream handle (null: legacy stream of the current device); on failure sets
// *err (and reports use of a destroyed stream) and returns null.
StreamImpl* lookup_stream(cudaStream_t s, const char* api, cudaError_t* err);
// Queues item on s, applying the legacy-default-stream rules and the race checker (the item's
// ranges, plus: `record` snapshots the stream's clock into the event, `wait_clock` is joined into
// the stream's clock). Returns the item's sequence number on s (1-based).
// `clock_out` receives the stream's clock just after the item (for a host that will wait for it).
uint64_t submit(StreamImpl* s, Item item, const VClock* wait_clock = nullptr, VClock* clock_out = nullptr);
// Waits until s completed item `seq`.
void wait_for(StreamImpl* s, uint64_t seq);
// Waits for everything queued on s so far, makes the host observe it, returns (and clears) the
// stream's pending error.
cudaError_t sync_stream(StreamImpl* s);
// Waits for everything queued on s so far and makes the host observe it (no error returned).
void drain_stream(StreamImpl* s);
// Waits for item seq of s, then makes the host observe `clock` (the stream's clock after it).
void wait_and_observe(StreamImpl* s, uint64_t seq, const VClock& clock);
// All streams of a device (cudaDeviceSynchronize, cudaFree).
cudaError_t sync_device(int dev);
std::string stream_name(const StreamImpl* s);
std::shared_ptr<const Site> make_site(const char* what);

// Memory (memory.cpp).
enum class MemKind { Pageable, Pinned, Device, Freed };
struct MemClass {
  MemKind kind = MemKind::Pageable;
  int device = -1;
};
MemClass classify(const void* p);
// Guard zones of every live allocation of a device (pinned memory: device -1).
void check_all_guards(int device, const std::string& after_what);

// Race checker (racecheck.cpp). All calls need race_mutex() held.
bool racecheck_enabled();
std::mutex& race_mutex();
void race_attach_agent(StreamImpl* s);  // gives a new stream its agent slot
void race_retire_agent(StreamImpl* s);  // cudaStreamDestroy: the slot may be reused
VClock& host_clock();
// Records s's new item (epoch assigned here) and checks its ranges against earlier accesses.
void race_on_item(StreamImpl* s, const std::vector<Range>& ranges, const std::shared_ptr<const Site>& site,
                  RaceStamp* stamp = nullptr);
// A stamped item's work touched the bytes [p + lo, p + hi) of each run: changed them (`exact`
// false: vgpu::race_record_written), or read or wrote exactly them (vgpu::race_record_accessed).
void race_on_accessed(const RaceStamp& stamp, const void* p, const std::vector<std::pair<size_t, size_t>>& runs,
                      bool write, bool exact);
// Drops the access history of an allocation (cudaFree).
struct AllocRecord;
void race_forget(AllocRecord* a);
// The host writes [p, p + bytes) now (a caching allocator's poison of a block it hands out
// without a stream): checked against unordered accesses of streams, then recorded.
void race_on_host_write(const void* p, size_t bytes, const std::shared_ptr<const Site>& site);
// The host (instrumented host code: src/kernel/access_hooks.cpp) touches pinned memory at pc:
// reported when a stream's work on those bytes, a write (or a read, when the host writes), is
// not ordered before it by a host synchronisation. Checked, not recorded: work the host queues
// later is ordered after it anyway.
void race_on_host_access(const void* p, size_t bytes, bool write, const void* pc, const char* via = nullptr);
// cudaFree of a block that a caching allocator sub-allocated: makes it the whole block again.
void end_sub(AllocRecord* a);

}  // namespace rt

struct StreamImpl {
  static constexpr uint64_t kMagic = 0x53545245414d5631ull;
  uint64_t magic = kMagic;
  int device = 0;
  unsigned flags = 0;
  bool legacy = false;
  uint64_t serial = 0;
  std::mutex mu;
  std::condition_variable cv_work, cv_done;
  std::deque<rt::Item> queue;
  uint64_t enqueued = 0, completed = 0;
  cudaError_t error = cudaSuccess;  // first error of its work, returned by the next sync/query
  std::atomic<bool> destroyed{false};
  // Guarded by race_mutex():
  uint32_t agent = 0;
  rt::VClock clock;
  uint64_t legacy_joined = 0;  // blocking streams: legacy items already waited for
  bool blocking() const { return !legacy && !(flags & cudaStreamNonBlocking); }
};

struct EventImpl {
  static constexpr uint64_t kMagic = 0x4556454e54563121ull;
  uint64_t magic = kMagic;
  int device = 0;
  unsigned flags = 0;
  std::atomic<int> refs{1};
  std::mutex mu;  // guards the fields below
  StreamImpl* stream = nullptr;  // latest record, null if never recorded
  uint64_t seq = 0;
  uint64_t gen = 0;
  bool timed = false;
  std::chrono::steady_clock::time_point when;
  // Guarded by race_mutex():
  rt::VClock clock;
};

namespace rt {
void release_event(EventImpl* e);
}

}  // namespace vgpu
