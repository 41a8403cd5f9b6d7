// The device-memory registry shared by src/runtime: one record per cudaMalloc/cudaMallocHost
// allocation (live or quarantined after free), found by address.
#pragma once
#include <algorithm>
#include <map>
#include <shared_mutex>

#include "runtime/arena.h"
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

// A cudaMalloc block that a caching allocator hands to successive users (vgpu/suballoc.h): None
// while it is used whole, Live while a user holds [base, base + bytes), Freed once that user
// gave it back.
enum class Sub : uint8_t { None, Live, Freed };

// A former user of some memory (a caching allocator's block, or a cudaFree'd allocation's address
// taken by a later one), remembered by the tag its pointers carried.
struct FormerUser {
  unsigned tag = 0;
  uint64_t id = 0;
  size_t bytes = 0;
  std::shared_ptr<const Site> alloc_site, free_site;
};

struct AllocRecord {
  // raw and base are view 0 addresses (arena.h): the runtime's own; its users' pointers carry a tag.
  char* raw = nullptr;
  size_t raw_bytes = 0;
  char* base = nullptr;
  // The view its users' pointers point into: `tag` in the host's program order (what cudaMalloc or
  // the last sub-allocation returned), `dev_tag` in stream order (what running kernels may use).
  unsigned tag = 0, dev_tag = 0;
  std::vector<FormerUser> former;  // the last few earlier users of this memory, newest last
  // The extent the host's checks see (operands, kernel arguments, the shadow): the cudaMalloc
  // size, or the current sub-allocation's size. Changed in the host's program order.
  size_t bytes = 0;
  size_t capacity = 0;   // the cudaMalloc size
  size_t dev_bytes = 0;  // where the guard zone after the user bytes begins, changed in stream order
  int device = -1;
  uint64_t id = 0;  // the allocation's, or the current sub-allocation's
  bool freed = false;
  Sub sub = Sub::None;
  uint64_t block_id = 0;  // the cudaMalloc allocation's id while sub-allocated
  bool freed_poison = false;  // the stream-ordered part of the last sub_free ran (its 0xDD is there)
  std::shared_ptr<const Site> alloc_site, free_site;
  std::shared_ptr<const Site> block_site;  // cudaMalloc's site while sub-allocated
  std::unique_ptr<std::atomic<uint64_t>[]> init;  // 1 bit per byte; device memory only
  std::vector<AccessRec> accesses;                // race checker; guarded by race_mutex()
};

// The words of an initialisation shadow (AllocRecord::init, one bit per byte) that the bytes
// [lo, hi) cover: f(word, mask) with the mask of those bytes' bits, until f returns false.
template <class F> void for_each_init_word(size_t lo, size_t hi, F&& f) {
  while (lo < hi) {
    const size_t word = lo / 64, bit = lo % 64, n = std::min<size_t>(64 - bit, hi - lo);
    const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
    if (!f(word, mask)) return;
    lo += n;
  }
}

struct Registry {
  std::shared_mutex mu;
  std::map<uintptr_t, AllocRecord*> by_base;  // live and quarantined records
};
Registry& registry();
// The record whose user bytes contain p, whatever p's tag (live or freed; an empty
// sub-allocation contains its base); registry().mu held by the caller.
AllocRecord* find_locked(const void* p);
// The record whose raw bytes (guard zones included) contain p, or null; registry().mu held.
AllocRecord* find_near_locked(const void* p);
// p's byte offset in a (p of any tag), the pointer its user holds, and whether p carries its tag.
inline size_t offset_of(const AllocRecord& a, const void* p) { return static_cast<size_t>(untag(p) - a.base); }
inline char* user_base(const AllocRecord& a) { return with_tag(a.base, a.tag); }
inline bool tag_ok(const AllocRecord& a, const void* p) { return tag_of(p) == a.tag; }
// Why p, which lies in a's memory with another tag than `tag` (a.tag or a.dev_tag), is not a's:
// the former user of the memory whose tag it carries (*stale set), or another allocation's
// pointer; "" when the tags agree. `stale` may be null.
std::string tag_problem(const AllocRecord& a, const void* p, unsigned tag, bool* stale);
// Freed by cudaFree, or a sub-allocation given back to its caching allocator.
inline bool gone(const AllocRecord& a) { return a.freed || a.sub == Sub::Freed; }
std::string describe_record(const AllocRecord& a);  // "allocation #id (N bytes of device memory on device d)"
std::string site_lines(const AllocRecord& a);       // "\n  allocation #id allocated by: ..." (+ freed by)

}  // namespace rt
}  // namespace vgpu
