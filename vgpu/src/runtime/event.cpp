// Events: a record is a stream item that completes after the work queued before it and stamps a
// steady_clock time; queries, waits and elapsed times follow the CUDA runtime's rules.
#include <sstream>

#include "runtime/internal.h"
#include "runtime/protect.h"

namespace vgpu {
namespace rt {
namespace {
std::atomic<size_t> g_live_events{0};
constexpr uint64_t kDestroyedMagic = 0x4445535452595631ull;

EventImpl* lookup_event(cudaEvent_t h, const char* api, cudaError_t* err) {
  if (!h) {
    *err = cudaErrorInvalidResourceHandle;
    return nullptr;
  }
  if (h->magic != EventImpl::kMagic) {
    std::ostringstream m;
    m << api << " got event handle " << static_cast<const void*>(h)
      << (h->magic == kDestroyedMagic ? ", which was already destroyed by cudaEventDestroy"
                                      : ", which cudaEventCreate never returned (or which was destroyed)")
      << ".";
    report_violation("invalid handle", m.str());
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

struct RecordState {
  StreamImpl* stream;
  uint64_t seq;
  bool timed;
  std::chrono::steady_clock::time_point when;
};
RecordState state_of(EventImpl* e) {
  std::lock_guard<std::mutex> lock(e->mu);
  return {e->stream, e->seq, e->timed, e->when};
}
bool completed(StreamImpl* s, uint64_t seq) {
  std::lock_guard<std::mutex> lock(s->mu);
  return s->completed >= seq;
}
}  // namespace

void release_event(EventImpl* e) {
  if (e->refs.fetch_sub(1) == 1) delete e;
}

}  // namespace rt

size_t live_events() { return rt::g_live_events.load(); }

}  // namespace vgpu

using vgpu::EventImpl;
using vgpu::StreamImpl;
using vgpu::rt::ret;

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event || (flags & ~0x7u)) return ret(cudaErrorInvalidValue);
  const cudaError_t e = vgpu::rt::context_error();
  if (e != cudaSuccess) return ret(e);
  auto* ev = new EventImpl;
  ev->device = vgpu::current_device();
  ev->flags = flags;
  ++vgpu::rt::g_live_events;
  *event = ev;
  return cudaSuccess;
}

// CUDA: "In case event has been recorded but has not yet been completed when cudaEventDestroy()
// is called, the function will return immediately and the resources associated with event will
// be released automatically once the device has completed event."
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  cudaError_t e = cudaSuccess;
  EventImpl* ev = vgpu::rt::lookup_event(event, "cudaEventDestroy", &e);
  if (!ev) return ret(e);
  ev->magic = vgpu::rt::kDestroyedMagic;
  --vgpu::rt::g_live_events;
  vgpu::rt::release_event(ev);
  return cudaSuccess;
}

// CUDA: the event captures the contents of the stream at the time of the call; "stream and
// event must be on the same CUDA context".
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  EventImpl* ev = vgpu::rt::lookup_event(event, "cudaEventRecord", &e);
  if (!ev) return ret(e);
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaEventRecord", &e);
  if (!s) return ret(e);
  if (s->device != ev->device) {
    vgpu::report_violation("wrong device", "cudaEventRecord of an event created on device " +
                                               std::to_string(ev->device) + " on " + vgpu::rt::stream_name(s) +
                                               "; CUDA: \"stream and event must be on the same CUDA context\".");
    return ret(cudaErrorInvalidResourceHandle);
  }
  ev->refs.fetch_add(1);  // held by the record item
  vgpu::rt::Item it;
  it.record = ev;
  it.self_contained = true;
  vgpu::rt::submit(s, std::move(it));
  return cudaSuccess;
}

// CUDA: cudaSuccess if all work captured by the latest record completed, or if the event was
// never recorded; cudaErrorNotReady otherwise (also the thread's last error, as in the runtime).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  cudaError_t e = cudaSuccess;
  EventImpl* ev = vgpu::rt::lookup_event(event, "cudaEventQuery", &e);
  if (!ev) return ret(e);
  std::lock_guard<std::mutex> race(vgpu::rt::race_mutex());
  const auto st = vgpu::rt::state_of(ev);
  if (!st.stream) return cudaSuccess;
  if (!vgpu::rt::completed(st.stream, st.seq)) return ret(cudaErrorNotReady);
  vgpu::rt::host_synchronized();
  if (vgpu::rt::racecheck_enabled()) vgpu::rt::host_clock().join(ev->clock);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cudaError_t e = cudaSuccess;
  EventImpl* ev = vgpu::rt::lookup_event(event, "cudaEventSynchronize", &e);
  if (!ev) return ret(e);
  thread_local vgpu::rt::VClock snap;
  vgpu::rt::RecordState st;
  {
    std::lock_guard<std::mutex> race(vgpu::rt::race_mutex());
    st = vgpu::rt::state_of(ev);
    snap.v.assign(ev->clock.v.begin(), ev->clock.v.end());
  }
  if (!st.stream) return cudaSuccess;  // never recorded: nothing to wait for
  vgpu::rt::wait_and_observe(st.stream, st.seq, snap);
  return ret(vgpu::rt::device_error(ev->device));
}

// CUDA: cudaErrorInvalidResourceHandle if either event was never recorded or was created with
// cudaEventDisableTiming; cudaErrorNotReady if either has not completed yet.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return ret(cudaErrorInvalidValue);
  cudaError_t e = cudaSuccess;
  EventImpl* a = vgpu::rt::lookup_event(start, "cudaEventElapsedTime", &e);
  if (!a) return ret(e);
  EventImpl* b = vgpu::rt::lookup_event(end, "cudaEventElapsedTime", &e);
  if (!b) return ret(e);
  if ((a->flags | b->flags) & cudaEventDisableTiming) return ret(cudaErrorInvalidResourceHandle);
  const auto sa = vgpu::rt::state_of(a), sb = vgpu::rt::state_of(b);
  if (!sa.stream || !sb.stream) return ret(cudaErrorInvalidResourceHandle);
  if (!vgpu::rt::completed(sa.stream, sa.seq) || !vgpu::rt::completed(sb.stream, sb.seq))
    return ret(cudaErrorNotReady);
  const auto ta = vgpu::rt::state_of(a), tb = vgpu::rt::state_of(b);  // stamped once completed
  if (!ta.timed || !tb.timed) return ret(cudaErrorInvalidResourceHandle);  // re-recorded meanwhile
  *ms = std::chrono::duration<float, std::milli>(tb.when - ta.when).count();
  return cudaSuccess;
}

// CUDA: later work on the stream waits for the work captured by the event's latest record at the
// time of this call; an event never recorded makes this a no-op. The event may be of another device.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  cudaError_t e = cudaSuccess;
  StreamImpl* s = vgpu::rt::lookup_stream(stream, "cudaStreamWaitEvent", &e);
  if (!s) return ret(e);
  EventImpl* ev = vgpu::rt::lookup_event(event, "cudaStreamWaitEvent", &e);
  if (!ev) return ret(e);
  if (flags != 0) return ret(cudaErrorInvalidValue);
  thread_local vgpu::rt::VClock snap;
  vgpu::rt::RecordState st;
  {
    std::lock_guard<std::mutex> race(vgpu::rt::race_mutex());
    st = vgpu::rt::state_of(ev);
    snap.v.assign(ev->clock.v.begin(), ev->clock.v.end());
  }
  if (!st.stream) return cudaSuccess;
  vgpu::rt::Item it;
  it.wait_stream = st.stream;
  it.wait_seq = st.seq;
  vgpu::rt::submit(s, std::move(it), &snap);
  return cudaSuccess;
}
