// The device-memory registry shared by src/runtime: one record per cudaMalloc/cudaMallocHost
// allocation (live or quarantined after free), found by address.
#pragma once
#include <map>
#include <shared_mutex>

#include "runtime/internal.h"

namespace vgpu {
namespace rt {

constexpr size_t kGuardBytes = 256;       // guard zone before the user bytes (and at least after)
constexpr unsigned char kGuardByte = 0xFD;  // guard fill
constexpr unsigned char kFreshByte = 0xFF;  // cudaMalloc does not initialise memory: poison it
constexpr unsigned char kFreedByte = 0xDD;  // freed memory in quarantine

// One recorded access of the race checker: a byte range of an allocation used by an agent.
struct AccessRec {
  size_t lo, hi;  // offsets in the allocation
  uint32_t agent;
  uint64_t epoch;
  bool write;
  bool reported;
  const StreamImpl* stream;  // for messages (streams are never deleted)
  std::shared_ptr<const Site> site;
  std::shared_ptr<const VClock> clock;  // the agent's clock at the access: what was ordered before it
};

struct AllocRecord {
  char* raw = nullptr;
  size_t raw_bytes = 0;
  char* base = nullptr;
  size_t bytes = 0;
  int device = -1;
  uint64_t id = 0;
  bool freed = false;
  std::shared_ptr<const Site> alloc_site, free_site;
  std::unique_ptr<std::atomic<uint64_t>[]> init;  // 1 bit per byte; device memory only
  std::vector<AccessRec> accesses;                // race checker; guarded by race_mutex()
};

struct Registry {
  std::shared_mutex mu;
  std::map<uintptr_t, AllocRecord*> by_base;  // live and quarantined records
};
Registry& registry();
// The record whose user bytes contain p (live or freed); registry().mu held by the caller.
AllocRecord* find_locked(const void* p);
std::string describe_record(const AllocRecord& a);  // "allocation #id (N bytes of device memory on device d)"
std::string site_lines(const AllocRecord& a);       // "\n  allocation #id allocated by: ..." (+ freed by)

}  // namespace rt
}  // namespace vgpu
