// Cross-stream race checker: vector clocks over agents (the host, each stream), advanced in the
// host's program order at enqueue time; every allocation keeps its recent accesses, and a new
// access that conflicts with an unordered access of another agent is reported with both sites.
//
// Ordering edges (CUDA's rules): host program order precedes work it queues; work in one stream
// is ordered; cudaEventRecord + cudaStreamWaitEvent; host synchronisation (stream/event/device
// synchronize, a successful query, synchronous copies, cudaFree); the legacy default stream
// against blocking streams. All host threads form one agent: the checker follows the real order
// of their runtime calls (mutexes and thread starts between host threads are invisible to it).
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/registry.h"

namespace vgpu {
namespace rt {
namespace {

constexpr size_t kMaxAccessesPerAllocation = 64;  // oldest dropped beyond this (bounded memory)

struct Agents {
  uint32_t next = 1;                 // slot 0 is the host
  std::vector<uint32_t> free;        // slots of destroyed streams
  std::vector<uint64_t> last_epoch;  // per slot: the last epoch used (reused slots continue it)
};
Agents& agents() {
  static Agents* a = new Agents;
  return *a;
}

void report_race(const AllocRecord& a, const AccessRec& old, const AccessRec& now) {
  std::ostringstream m;
  m << (now.site ? now.site->what : std::string("?")) << " on " << stream_name(now.stream) << " "
    << (now.write ? "writes" : "reads") << " bytes [" << now.lo << ", " << now.hi << ") of " << describe_record(a)
    << ", which " << (old.site ? old.site->what : std::string("?")) << " on " << stream_name(old.stream) << " "
    << (old.write ? "wrote" : "read") << " (bytes [" << old.lo << ", " << old.hi
    << ")) with nothing ordering the two: no cudaEventRecord after the first that the second stream waited for "
       "(cudaStreamWaitEvent), and no host synchronisation with the first stream before the second was queued. "
       "CUDA runs work of different streams concurrently unless events, synchronisation or the legacy default "
       "stream order it."
    << "\n  first:  " << (old.site ? old.site->describe() : std::string("?"))
    << "\n  second: " << (now.site ? now.site->describe() : std::string("?"))
    << site_lines(a);
  report_violation("race", m.str());
}

void check_and_record(AllocRecord& a, AccessRec&& now, const VClock& clock) {
  auto& acc = a.accesses;
  for (size_t i = 0; i < acc.size();) {
    AccessRec& o = acc[i];
    if (o.hi <= now.lo || o.lo >= now.hi) {
      ++i;
      continue;
    }
    const bool ordered = o.agent == now.agent || o.epoch <= clock.get(o.agent);
    if (!ordered && (o.write || now.write) && !o.reported) {
      o.reported = true;  // one report per earlier access
      report_race(a, o, now);
    }
    // An earlier access covered by this one and ordered before it can go: any later access
    // that races with it races with this one too, except when it was a write and this a read.
    if (ordered && o.lo >= now.lo && o.hi <= now.hi && !(o.write && !now.write)) {
      acc.erase(acc.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  acc.push_back(std::move(now));
  if (acc.size() > kMaxAccessesPerAllocation) acc.erase(acc.begin());
}

}  // namespace

bool racecheck_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VGPU_RACECHECK");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

std::mutex& race_mutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}

VClock& host_clock() {
  static VClock* c = new VClock;
  return *c;
}

void race_attach_agent(StreamImpl* s) {
  Agents& ag = agents();
  uint32_t slot;
  if (!ag.free.empty()) {
    slot = ag.free.back();
    ag.free.pop_back();
  } else {
    slot = ag.next++;
    ag.last_epoch.resize(slot + 1, 0);
  }
  s->agent = slot;
  s->clock.v.clear();
  s->clock.set(slot, ag.last_epoch[slot]);
}

void race_retire_agent(StreamImpl* s) {
  Agents& ag = agents();
  ag.last_epoch[s->agent] = s->clock.get(s->agent);
  ag.free.push_back(s->agent);
}

void race_on_item(StreamImpl* s, const std::vector<Range>& ranges, const std::shared_ptr<const Site>& site,
                  RaceStamp* stamp) {
  VClock& host = host_clock();
  s->clock.join(host);                // what the host did before queuing precedes the item
  host.set(0, host.get(0) + 1);       // and what it does next does not
  const uint64_t epoch = s->clock.get(s->agent) + 1;
  s->clock.set(s->agent, epoch);
  std::shared_ptr<const VClock> clock;
  if (!ranges.empty() || stamp) clock = std::make_shared<const VClock>(s->clock);
  if (stamp) {
    stamp->agent = s->agent;
    stamp->epoch = epoch;
    stamp->stream = s;
    stamp->clock = clock;
    stamp->site = site;
    stamp->filled = true;
  }
  for (const Range& r : ranges) {
    if (r.bytes == 0 || !r.ptr) continue;
    AllocRecord* a;
    {
      std::shared_lock<std::shared_mutex> lock(registry().mu);
      a = find_locked(r.ptr);
    }
    // Records are deleted only under race_mutex() (held here), so `a` stays valid.
    if (!a || a->freed) continue;
    const size_t lo = offset_of(*a, r.ptr);
    const size_t hi = std::min(a->capacity, lo + r.bytes);
    check_and_record(*a, AccessRec{lo, hi, s->agent, epoch, r.access == Access::Write, false, s, site, clock},
                     s->clock);
  }
}

void race_on_accessed(const RaceStamp& st, const void* p, const std::vector<std::pair<size_t, size_t>>& runs,
                      bool write, bool exact) {
  AllocRecord* a;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    a = find_locked(p);
  }
  if (!a || a->freed || runs.empty()) return;
  const size_t base = offset_of(*a, p);
  // The accesses recorded since the item was queued may come after it in the host's order, so
  // order is tested both ways: either access ordered before the other is no race.
  auto unordered = [&](const AccessRec& o) {
    const bool before = o.epoch <= st.clock->get(o.agent);
    const bool after = o.clock && st.epoch <= o.clock->get(st.agent);
    return o.agent != st.agent && !before && !after;
  };
  // Bytes that changed while the kernel ran are its own writes, except inside the ranges that
  // unordered writers of other streams declared (they may have run at the same time: a reduction
  // of one gradient bucket beside a kernel writing another). Those are left out; what an
  // instrumented kernel logged is its own, and nothing is left out.
  using Runs = std::vector<std::pair<size_t, size_t>>;
  auto minus_unordered_writers = [&](Runs own) {
    for (const AccessRec& o : a->accesses) {
      if (!o.write || !unordered(o)) continue;
      Runs rest;
      for (const auto& [lo, hi] : own) {
        if (o.hi <= lo || o.lo >= hi) {
          rest.emplace_back(lo, hi);
          continue;
        }
        if (lo < o.lo) rest.emplace_back(lo, o.lo);
        if (o.hi < hi) rest.emplace_back(o.hi, hi);
      }
      own.swap(rest);
    }
    return own;
  };
  Runs own;
  for (const auto& [lo, hi] : runs)
    if (base + lo < a->capacity) own.emplace_back(base + lo, std::min(a->capacity, base + hi));
  if (!exact) own = minus_unordered_writers(std::move(own));
  if (own.empty()) return;
  for (const auto& [lo, hi] : own) {
    const AccessRec now{lo, hi, st.agent, st.epoch, write, false, st.stream, st.site, st.clock};
    for (AccessRec& o : a->accesses) {
      if (o.hi <= lo || o.lo >= hi || o.reported || !(o.write || write) || !unordered(o)) continue;
      o.reported = true;
      report_race(*a, o, now);
    }
  }
  // Recorded for later accesses: the runs, or with many (row-sparse accesses) their hull less the
  // unordered writers' ranges, so that the bounded history is not flushed.
  constexpr size_t kMaxRuns = 8;
  if (own.size() > kMaxRuns) own = minus_unordered_writers(Runs{{own.front().first, own.back().second}});
  for (const auto& [lo, hi] : own) {
    a->accesses.push_back(AccessRec{lo, hi, st.agent, st.epoch, write, false, st.stream, st.site, st.clock});
    if (a->accesses.size() > kMaxAccessesPerAllocation) a->accesses.erase(a->accesses.begin());
  }
}

void race_on_host_write(const void* p, size_t bytes, const std::shared_ptr<const Site>& site) {
  AllocRecord* a;
  {
    std::shared_lock<std::shared_mutex> lock(registry().mu);
    a = find_locked(p);
  }
  if (!a || a->freed || bytes == 0) return;
  VClock& host = host_clock();
  const uint64_t epoch = host.get(0) + 1;
  host.set(0, epoch + 1);  // what the host queues next is ordered after this write
  const size_t lo = offset_of(*a, p);
  auto clock = std::make_shared<const VClock>(host);
  check_and_record(*a, AccessRec{lo, std::min(a->capacity, lo + bytes), 0, epoch, true, false, nullptr, site, clock},
                   host);
}

void race_on_host_access(const void* p, size_t bytes, bool write, const void* pc, const char* via) {
  if (!racecheck_enabled() || bytes == 0) return;
  std::lock_guard<std::mutex> lock(race_mutex());
  AllocRecord* a;
  {
    std::shared_lock<std::shared_mutex> rl(registry().mu);
    a = find_locked(p);
  }
  if (!a || a->freed) return;
  const VClock& host = host_clock();
  const size_t lo = offset_of(*a, p), hi = lo + bytes;
  for (AccessRec& o : a->accesses) {
    if (o.hi <= lo || o.lo >= hi || o.agent == 0 || o.reported || !(o.write || write)) continue;
    if (o.epoch <= host.get(o.agent)) continue;  // the host has synchronised with it since
    o.reported = true;
    std::ostringstream m;
    m << "the host " << (write ? "writes " : "reads ") << bytes << " byte(s)" << (via ? " with " : "") << (via ? via : "")
      << " at byte offset " << lo << " of "
      << describe_record(*a) << ", which " << (o.site ? o.site->what : std::string("?")) << " on "
      << stream_name(o.stream) << " " << (o.write ? "writes" : "reads") << " (bytes [" << o.lo << ", " << o.hi
      << ")), and the host has not synchronised with that stream since it queued the work: it may not have run "
         "yet. The host must wait for it (cudaStreamSynchronize, or cudaEventSynchronize on an event recorded "
         "after it) before it "
      << (write ? "overwrites a buffer a copy still reads" : "reads what a copy has yet to write")
      << " (CUDA C++ Programming Guide, Asynchronous Concurrent Execution)."
      << "\n  host:  " << describe_code_address(pc)
      << "\n  work:  " << (o.site ? o.site->describe() : std::string("?")) << site_lines(*a);
    report_violation("race", m.str());
  }
}

void race_forget(AllocRecord* a) {
  a->accesses.clear();
  a->accesses.shrink_to_fit();
}

}  // namespace rt
}  // namespace vgpu
