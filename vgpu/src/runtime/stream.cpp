// Streams: one worker thread per stream runs its FIFO of work in order; the legacy default
// stream of each device is created on first use and synchronises with blocking streams.
// enqueue() is the door through which the kernel, cuBLAS and NCCL parts queue work.
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernel/access_check.h"
#include "runtime/arena.h"
#include "runtime/internal.h"
#include "runtime/protect.h"

namespace vgpu {
namespace rt {
namespace {

std::atomic<uint64_t> g_serial{0};

cudaError_t run_item(StreamImpl* s, Item& it) {
  if (it.wait_stream) {
    wait_for(it.wait_stream, it.wait_seq);
    return cudaSuccess;
  }
  if (it.record) {
    EventImpl* e = it.record;
    it.record = nullptr;
    {
      std::lock_guard<std::mutex> lock(e->mu);
      if (e->gen == it.record_gen) {
        e->when = std::chrono::steady_clock::now();
        e->timed = true;
      }
    }
    release_event(e);
    return cudaSuccess;
  }
  if (!it.work) return cudaSuccess;
  // A corrupted context runs nothing more (CUDA: the sticky error is returned by all later calls).
  if (device_state(s->device).sticky.load(std::memory_order_relaxed) != 0) return cudaSuccess;
  DeviceAccess access(/*keep_open=*/true);  // the item works on the device's behalf (protect.h)
  if (!it.through_view0)  // copies and memsets go through view 0 (kernel/raw_memory.h): nothing to open
    for (const Range& r : it.ranges) open_ahead(r.ptr, r.bytes);
  cudaError_t e;
  try {
    e = it.work();
  } catch (const std::exception& ex) {
    report_violation("internal", std::string("stream work threw: ") + ex.what() + "; queued by " +
                                     (it.site ? it.site->describe() : std::string("?")));
    e = cudaErrorLaunchFailure;
  } catch (...) {
    report_violation("internal", "stream work threw a non-standard exception; queued by " +
                                     (it.site ? it.site->describe() : std::string("?")));
    e = cudaErrorLaunchFailure;
  }
  for (const Range& r : it.ranges)
    if (r.access == Access::Write && r.bytes) check_guards(r.ptr, it.site ? it.site->what : std::string("stream work"));
  return e;
}

// Whether self-contained work queued on an idle stream runs on the submitting thread
// (VGPU_RUN_ON_CALLER, default on).
bool run_on_caller() {
  static const bool on = [] {
    const char* v = std::getenv("VGPU_RUN_ON_CALLER");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// Pinned host memory is shared with the host: work on it keeps to the worker, so that a host that
// uses it without synchronising still sees the work late, as on a GPU.
bool only_device_memory(const std::vector<Range>& ranges) {
  for (const Range& r : ranges)
    if (!in_device_arena(r.ptr)) return false;
  return true;
}

// The front item `it` of s has run (e: its result; lk, on s->mu, not held): its captures are
// released outside the lock, its error recorded, and it leaves the queue. Returns with lk held.
void retire_front(StreamImpl* s, Item& it, cudaError_t e, std::unique_lock<std::mutex>& lk) {
  if (is_sticky(e)) make_sticky(s->device, e);
  it.work = nullptr;
  it.site.reset();
  lk.lock();
  if (e != cudaSuccess && !is_sticky(e) && s->error == cudaSuccess) s->error = e;
  s->queue.pop_front();
  ++s->completed;
  s->cv_done.notify_all();
}

// The front item of s, claimed by this (submitting) thread, runs here as the worker would run it,
// leaving this thread's CUDA state as it was.
void run_claimed(StreamImpl* s) {
  Item& it = s->queue.front();  // only this thread pops it
  const bool was_vgpu = kernel::t_vgpu_thread;
  const ThreadState saved = thread_state();
  kernel::t_vgpu_thread = true;
  const cudaError_t e = run_item(s, it);
  kernel::t_vgpu_thread = was_vgpu;
  thread_state() = saved;
  std::unique_lock<std::mutex> lk(s->mu, std::defer_lock);
  retire_front(s, it, e, lk);
  if (!s->queue.empty() || s->destroyed.load()) s->cv_work.notify_one();  // what came meanwhile
}

void worker_loop(StreamImpl* s) {
  kernel::t_vgpu_thread = true;  // it touches device memory on the runtime's behalf (in its items)
  start_without_device_access();
  keep_open_between_items();
  std::unique_lock<std::mutex> lk(s->mu);
  for (;;) {
    s->cv_work.wait(lk, [s] { return s->queue.empty() ? s->destroyed.load() : !s->queue.front().claimed; });
    if (s->queue.empty()) {  // destroyed and drained: keep only the small handle object
      std::deque<Item>().swap(s->queue);
      break;
    }
    Item& it = s->queue.front();  // stays valid: deque::push_back keeps references
    lk.unlock();
    retire_front(s, it, run_item(s, it), lk);
  }
  lk.unlock();
  DeviceState& d = device_state(s->device);
  std::lock_guard<std::mutex> lock(d.mu);
  d.streams.erase(std::remove(d.streams.begin(), d.streams.end(), s), d.streams.end());
}

// Streams are never deleted (handles stay checkable); their workers exit after cudaStreamDestroy
// once the queued work is done. Lock order: race_mutex() before DeviceState::mu.
StreamImpl* create_stream(int dev, unsigned flags, bool legacy) {
  auto* s = new StreamImpl;
  s->device = dev;
  s->flags = flags;
  s->legacy = legacy;
  s->serial = ++g_serial;
  {
    std::lock_guard<std::mutex> race(race_mutex());
    race_attach_agent(s);
  }
  DeviceState& d = device_state(dev);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.streams.push_back(s);
    if (legacy) d.legacy = s;
  }
  std::thread(worker_loop, s).detach();
  return s;
}

// CUDA: "The host function must not make any CUDA API calls."
bool called_from_host_fn(const char* api) {
  if (!thread_state().in_host_fn) return false;
  report_violation("API call in host function",
                   std::string(api) +
                       " was called from a host function queued with cudaLaunchHostFunc; CUDA: \"The host function "
                       "must not make any CUDA API calls\" (it may deadlock).");
  return true;
}

}  // namespace

std::shared_ptr<const Site> make_site(const char* what) { return std::make_shared<const Site>(capture_site(what)); }

StreamImpl* legacy_stream(int dev) {
  DeviceState& d = device_state(dev);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.legacy) return d.legacy;
  }
  static std::mutex create_mu;  // one creation at a time; taken before race_mutex()
  std::lock_guard<std::mutex> create(create_mu);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.legacy) return d.legacy;
  }
  return create_stream(dev, cudaStreamDefault, true);
}

StreamImpl* lookup_stream(cudaStream_t h, const char* api, cudaError_t* err) {
  if (called_from_host_fn(api)) {
    *err = cudaErrorNotSupported;
    return nullptr;
  }
  if (!h) {
    const int dev = thread_state().device;
    const cudaError_t e = device_error(dev);
    if (e != cudaSuccess) {
      *err = e;
      return nullptr;
    }
    return legacy_stream(dev);
  }
  if (h->magic != StreamImpl::kMagic) {
    std::ostringstream m;
    m << api << " got stream handle " << static_cast<const void*>(h)
      << ", which cudaStreamCreate never returned.";
    report_violation("invalid handle", m.str());
    *err = cudaErrorInvalidResourceHandle;
    return nullptr;
  }
  if (h->destroyed.load()) {
    report_violation("use after destroy", std::string(api) + " used " + stream_name(h) +
                                              " after cudaStreamDestroy; a destroyed stream handle is invalid.");
    *err = cudaErrorInvalidResourceHandle;
    return nullptr;
  }
  const cudaError_t e = device_error(h->device);
  if (e != cudaSuccess) {
    *err = e;
    return nullptr;
  }
  return h;
}

std::string stream_name(const StreamImpl* s) {
  if (!s) return "the host";
  std::ostringstream m;
  if (s->legacy)
    m << "the legacy default stream of device " << s->device;
  else
    m << "stream #" << s->serial << " (device " << s->device << ", "
      << ((s->flags & cudaStreamNonBlocking) ? "non-blocking" : "blocking") << ")";
  return m.str();
}

uint64_t submit(StreamImpl* s, Item item, const VClock* wait_clock, VClock* clock_out) {
  const bool race = racecheck_enabled();
  Item waits[1];
  std::vector<Item> more_waits;  // legacy stream behind several blocking streams
  int nwaits = 0;
  std::unique_lock<std::mutex> race_lock(race_mutex());
  DeviceState& d = device_state(s->device);
  // CUDA (stream synchronization behavior): "When an action is taken in the legacy stream ...,
  // the legacy stream first waits on all blocking streams, the action is queued in the legacy
  // stream, and then all blocking streams wait on the legacy stream." Non-blocking streams take
  // no part.
  if (s->blocking()) {
    StreamImpl* L;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      L = d.legacy;
    }
    if (L) {
      uint64_t lseq, ldone;
      {
        std::lock_guard<std::mutex> lock(L->mu);
        lseq = L->enqueued;
        ldone = L->completed;
      }
      if (lseq > s->legacy_joined) {
        s->legacy_joined = lseq;
        if (race) s->clock.join(L->clock);
        if (ldone < lseq) {
          waits[0].wait_stream = L;
          waits[0].wait_seq = lseq;
          nwaits = 1;
        }
      }
    }
  } else if (s->legacy) {
    std::lock_guard<std::mutex> lock(d.mu);
    for (StreamImpl* b : d.streams) {
      if (!b->blocking()) continue;
      uint64_t bseq, bdone;
      {
        std::lock_guard<std::mutex> bl(b->mu);
        bseq = b->enqueued;
        bdone = b->completed;
      }
      if (race) s->clock.join(b->clock);
      if (bdone < bseq) {
        Item w;
        w.wait_stream = b;
        w.wait_seq = bseq;
        more_waits.push_back(std::move(w));
      }
    }
  }
  if (race) {
    if (wait_clock) s->clock.join(*wait_clock);
    race_on_item(s, item.ranges, item.site, item.stamp.get());
    if (item.record) item.record->clock = s->clock;
    if (clock_out) *clock_out = s->clock;
  }
  uint64_t seq;
  bool here;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    seq = s->enqueued + static_cast<uint64_t>(nwaits) + more_waits.size() + 1;
    here = item.self_contained && s->queue.empty() && nwaits == 0 && more_waits.empty() && run_on_caller() &&
           !kernel::t_vgpu_thread && only_device_memory(item.ranges);
    item.claimed = here;
    if (item.record) {
      EventImpl* e = item.record;
      std::lock_guard<std::mutex> el(e->mu);
      e->stream = s;
      e->seq = seq;
      item.record_gen = ++e->gen;
      e->timed = false;
    }
    for (int i = 0; i < nwaits; ++i) s->queue.push_back(std::move(waits[i]));
    for (Item& w : more_waits) s->queue.push_back(std::move(w));
    s->queue.push_back(std::move(item));
    s->enqueued = seq;
  }
  race_lock.unlock();
  if (here)
    run_claimed(s);
  else
    s->cv_work.notify_one();
  return seq;
}

void wait_for(StreamImpl* s, uint64_t seq) {
  {
    std::unique_lock<std::mutex> lk(s->mu);
    s->cv_done.wait(lk, [s, seq] { return s->completed >= seq; });
  }
  host_synchronized();  // a host thread may now read what it waited for: device memory closed (protect.h)
}

void wait_and_observe(StreamImpl* s, uint64_t seq, const VClock& clock) {
  wait_for(s, seq);
  if (!racecheck_enabled()) return;
  std::lock_guard<std::mutex> race(race_mutex());
  host_clock().join(clock);
}

void drain_stream(StreamImpl* s) {
  thread_local VClock snap;
  uint64_t target;
  {
    std::lock_guard<std::mutex> race(race_mutex());
    snap.v.assign(s->clock.v.begin(), s->clock.v.end());
    std::lock_guard<std::mutex> lock(s->mu);
    target = s->enqueued;
  }
  wait_and_observe(s, target, snap);
}

cudaError_t sync_stream(StreamImpl* s) {
  drain_stream(s);
  const cudaError_t sticky = static_cast<cudaError_t>(device_state(s->device).sticky.load());
  if (sticky != cudaSuccess) return sticky;
  std::lock_guard<std::mutex> lock(s->mu);
  const cudaError_t e = s->error;
  s->error = cudaSuccess;
  return e;
}

cudaError_t sync_device(int dev) {
  std::vector<StreamImpl*> streams;
  {
    DeviceState& d = device_state(dev);
    std::lock_guard<std::mutex> lock(d.mu);
    streams = d.streams;
  }
  cudaError_t first = cudaSuccess;
  for (StreamImpl* s : streams) {
    const cudaError_t e = sync_stream(s);
    if (first == cudaSuccess) first = e;
  }
  check_all_guards(dev, "synchronising device " + std::to_string(dev));
  return first;
}

}  // namespace rt

cudaStream_t resolve_stream(cudaStream_t s) {
  cudaError_t e = cudaSuccess;
  return rt::lookup_stream(s, "resolve_stream", &e);
}

int stream_device(cudaStream_t s) {
  cudaError_t e = cudaSuccess;
  StreamImpl* st = rt::lookup_stream(s, "stream_device", &e);
  return st ? st->device : -1;
}

void enqueue(cudaStream_t s, Site site, std::vector<Range> ranges, std::function<cudaError_t()> work,
             bool self_contained) {
  enqueue_stamped(s, std::move(site), std::move(ranges), std::move(work), nullptr, self_contained);
}

std::shared_ptr<RaceStamp> new_race_stamp() { return std::make_shared<RaceStamp>(); }

bool race_stamp_filled(const RaceStamp& stamp) { return stamp.filled; }

void enqueue_stamped(cudaStream_t s, Site site, std::vector<Range> ranges, std::function<cudaError_t()> work,
                     const std::shared_ptr<RaceStamp>& stamp, bool self_contained) {
  cudaError_t e = cudaSuccess;
  StreamImpl* st = rt::lookup_stream(s, site.what.c_str(), &e);
  if (!st) {
    rt::ret(e);
    return;
  }
  rt::Item it;
  it.work = std::move(work);
  it.site = std::make_shared<const Site>(std::move(site));
  it.ranges = std::move(ranges);
  it.stamp = stamp;
  it.self_contained = self_contained;
  rt::submit(st, std::move(it));
}

void race_record_written(const RaceStamp& stamp, const void* p, const std::vector<std::pair<size_t, size_t>>& runs) {
  if (!stamp.filled || runs.empty()) return;
  std::lock_guard<std::mutex> race(rt::race_mutex());
  rt::race_on_accessed(stamp, p, runs, /*write=*/true, /*exact=*/false);
}

void race_record_accessed(const RaceStamp& stamp, const void* p, const std::vector<std::pair<size_t, size_t>>& runs,
                          bool write) {
  if (!stamp.filled || runs.empty()) return;
  std::lock_guard<std::mutex> race(rt::race_mutex());
  rt::race_on_accessed(stamp, p, runs, write, /*exact=*/true);
}

void reset_device_for_testing(int device) {
  if (device < 0 || device >= rt::kMaxDevices) return;
  rt::DeviceState& d = rt::device_state(device);
  std::vector<StreamImpl*> streams;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    streams = d.streams;
  }
  for (StreamImpl* s : streams) rt::drain_stream(s);
  d.sticky.store(0);
  for (StreamImpl* s : streams) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->error = cudaSuccess;
  }
}

void host_observes_stream(cudaStream_t s) {
  cudaError_t e = cudaSuccess;
  StreamImpl* st = rt::lookup_stream(s, "host_observes_stream", &e);
  if (!st || !rt::racecheck_enabled()) return;
  std::lock_guard<std::mutex> race(rt::race_mutex());
  rt::host_clock().join(st->clock);
}

}  // namespace vgpu

using vgpu::StreamImpl;
using vgpu::rt::ret;

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (!pStream || (flags & ~0x1u)) return ret(cudaErrorInvalidValue);
  const int dev = vgpu::current_device();
  const cudaError_t e = vgpu::rt::device_error(dev);
  if (e != cudaSuccess) return ret(e);
  *pStream = vgpu::rt::create_stream(dev, flags, false);
  return cudaSuccess;
}

// CUDA: "In case the device is still doing work in the stream when cudaStreamDestroy() is called,
// the function will return immediately and the resources associated with stream will be released
// automatically once the device has completed all work in stream."
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return ret(cudaErrorInvalidResourceHandle);
  cudaError_t e = cudaSuccess;
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaStreamDestroy", &e);
  if (!s) return ret(e);
  if (s->legacy) return ret(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> race(vgpu::rt::race_mutex());
    vgpu::rt::race_retire_agent(s);
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->destroyed = true;
  }
  s->cv_work.notify_one();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaStreamSynchronize", &e);
  if (!s) return ret(e);
  return ret(vgpu::rt::sync_stream(s));
}

// CUDA: cudaSuccess when all work in the stream completed, else cudaErrorNotReady (which, as in
// the CUDA runtime, also becomes the thread's last error: pollers clear it with cudaGetLastError).
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaStreamQuery", &e);
  if (!s) return ret(e);
  {
    std::lock_guard<std::mutex> race(vgpu::rt::race_mutex());
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->completed < s->enqueued) return ret(cudaErrorNotReady);
    vgpu::rt::host_synchronized();
    if (vgpu::rt::racecheck_enabled()) vgpu::rt::host_clock().join(s->clock);
    e = s->error;
    s->error = cudaSuccess;
  }
  const cudaError_t sticky = vgpu::rt::device_error(s->device);
  return ret(sticky != cudaSuccess ? sticky : e);
}

// CUDA: the host function runs on the stream after the work before it and blocks the work after
// it; it must not call the CUDA API.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  cudaError_t e = cudaSuccess;
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaLaunchHostFunc", &e);
  if (!s) return ret(e);
  if (!fn) return ret(cudaErrorInvalidValue);
  vgpu::rt::Item it;
  it.work = [fn, userData] {
    vgpu::rt::thread_state().in_host_fn = true;
    const vgpu::rt::HostCode host;  // the host function is host code: no access to device memory
    fn(userData);
    vgpu::rt::thread_state().in_host_fn = false;
    return cudaSuccess;
  };
  it.site = vgpu::rt::make_site("cudaLaunchHostFunc");
  vgpu::rt::submit(s, std::move(it));
  return cudaSuccess;
}
