// cudaMemcpy/cudaMemcpyAsync/cudaMemset/cudaMemsetAsync: direction and extents checked against
// what the pointers really are, then queued on the stream with the host synchronisation that
// CUDA's "API synchronization behavior" page documents for each kind of memory.
#include <cstring>
#include <sstream>

#include "kernel/raw_memory.h"
#include "runtime/internal.h"

namespace vgpu {
namespace rt {
namespace {

const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an invalid cudaMemcpyKind";
}

const char* mem_words(MemKind k) {
  switch (k) {
    case MemKind::Device: return "device memory (cudaMalloc)";
    case MemKind::Pinned: return "pinned host memory (cudaMallocHost)";
    case MemKind::Freed: return "freed memory";
    case MemKind::Pageable: return "pageable host memory (not from cudaMalloc or cudaMallocHost)";
  }
  return "?";
}

bool on_device(MemClass c) { return c.kind == MemKind::Device; }

// Adds a hint to a site's name where a "synchronous" call does not wait for its work, so a race
// report says why the host's return did not order it.
std::shared_ptr<const Site> annotate(const std::shared_ptr<const Site>& s, const char* note) {
  auto c = std::make_shared<Site>(*s);
  c->what += note;
  return c;
}

// One operand of a copy: a freed pointer or an overrun is a violation; pageable host memory
// cannot be checked.
bool operand_ok(const void* p, size_t n, MemClass c, const std::string& what) {
  if (c.kind == MemKind::Pageable) return true;
  return check_range(p, n, what, /*allow_pinned=*/true);
}

struct CopyPlan {
  cudaMemcpyKind kind;
  MemClass dst, src;
};

cudaError_t plan_copy(const char* api, void* dst, const void* src, size_t count, cudaMemcpyKind kind, CopyPlan* plan) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    report_violation("invalid argument", std::string(api) + " got copy kind " + std::to_string(static_cast<int>(kind)) +
                                             ", which is not a cudaMemcpyKind.");
    return cudaErrorInvalidMemcpyDirection;
  }
  if (count == 0) {
    plan->kind = kind;
    return cudaSuccess;
  }
  if (!dst || !src) {
    report_violation("null pointer", std::string(api) + " of " + std::to_string(count) + " bytes got a null " +
                                         (dst ? "source" : "destination") + ".");
    return cudaErrorInvalidValue;
  }
  plan->dst = classify(dst);
  plan->src = classify(src);
  const std::string a = api;
  if (!operand_ok(dst, count, plan->dst, a + " destination") || !operand_ok(src, count, plan->src, a + " source"))
    return cudaErrorInvalidValue;
  // cudaMemcpyDefault: "the type of transfer is inferred from the pointer values".
  if (kind == cudaMemcpyDefault) {
    kind = on_device(plan->src) ? (on_device(plan->dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                : (on_device(plan->dst) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  } else {
    const bool want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    const bool dst_bad = want_dst_dev != on_device(plan->dst), src_bad = want_src_dev != on_device(plan->src);
    if (dst_bad || src_bad) {
      std::ostringstream m;
      m << api << "(dst=" << dst << ", src=" << src << ", " << count << " bytes, " << kind_name(kind) << "): the "
        << (dst_bad ? "destination" : "source") << " is " << mem_words(dst_bad ? plan->dst.kind : plan->src.kind)
        << " but " << kind_name(kind) << " says it is " << ((dst_bad ? want_dst_dev : want_src_dev) ? "" : "not ")
        << "device memory. The kind must match the memory the pointers refer to (or be cudaMemcpyDefault).";
      report_violation("wrong copy direction", m.str());
      return cudaErrorInvalidValue;
    }
  }
  plan->kind = kind;
  // memcpy semantics: the two ranges must not overlap.
  const char *d = static_cast<const char*>(dst), *s = static_cast<const char*>(src);
  if (d < s + count && s < d + count) {
    report_violation("overlapping copy", std::string(api) + " copies " + std::to_string(count) +
                                             " bytes between overlapping ranges (dst - src = " +
                                             std::to_string(d - s) + " bytes); copies need disjoint ranges.");
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

Item copy_item(const char* api, void* dst, const void* src, size_t count, const CopyPlan& p,
               std::shared_ptr<std::vector<char>> staged, std::shared_ptr<const Site> site) {
  Item it;
  const bool check_src = on_device(p.src), mark_dst = on_device(p.dst);
  it.work = [api, dst, src, count, check_src, mark_dst, staged] {
    if (check_src) check_initialized(src, count, std::string(api) + " source");
    vgpu::kernel::raw_memcpy(dst, staged ? staged->data() : src, count);
    if (mark_dst) mark_initialized(dst, count);
    return cudaSuccess;
  };
  it.site = std::move(site);
  it.self_contained = true;
  it.through_view0 = true;
  if (p.src.kind == MemKind::Device || p.src.kind == MemKind::Pinned) it.ranges.push_back({src, count, Access::Read});
  if (p.dst.kind == MemKind::Device || p.dst.kind == MemKind::Pinned) it.ranges.push_back({dst, count, Access::Write});
  return it;
}

cudaError_t do_copy(const std::shared_ptr<const Site>& site, void* dst, const void* src, size_t count,
                    cudaMemcpyKind kind, cudaStream_t stream, bool sync_api) {
  const char* api = sync_api ? "cudaMemcpy" : "cudaMemcpyAsync";
  cudaError_t e = cudaSuccess;
  StreamImpl* s = lookup_stream(stream, api, &e);
  if (!s) return ret(e);
  CopyPlan p;
  e = plan_copy(api, dst, src, count, kind, &p);
  if (e != cudaSuccess || count == 0) return ret(e);
  const bool src_pageable = p.src.kind == MemKind::Pageable, dst_pageable = p.dst.kind == MemKind::Pageable;
  std::shared_ptr<std::vector<char>> staged;
  bool wait = false;
  switch (p.kind) {
    case cudaMemcpyHostToDevice:
      if (src_pageable) {
        // Pageable -> device: "a stream sync is performed before the copy is initiated" (cudaMemcpy);
        // both forms return once the source was copied to staging memory, so the caller may reuse
        // it, "but the DMA to final destination may not have completed".
        if (sync_api) drain_stream(s);
        staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + count);
      } else {
        wait = sync_api;  // pinned -> device: cudaMemcpy is synchronous, cudaMemcpyAsync is not
      }
      break;
    case cudaMemcpyDeviceToHost:
      // "For transfers from device to either pageable or pinned host memory, the function returns
      // only once the copy has completed" (cudaMemcpy); cudaMemcpyAsync to pageable memory is
      // synchronous as well (it cannot DMA into pageable memory), to pinned memory asynchronous.
      wait = sync_api || dst_pageable;
      break;
    case cudaMemcpyDeviceToDevice:
      wait = false;  // "For transfers from device memory to device memory, no host-side synchronization"
      break;
    default:
      wait = true;  // "For transfers from any host memory to any host memory, the function is fully synchronous"
      break;
  }
  std::shared_ptr<const Site> item_site = site;
  if (sync_api && !wait)
    item_site = annotate(site, p.kind == cudaMemcpyHostToDevice
                                   ? " (from pageable memory: returns once the source is staged, before the copy "
                                     "reaches the device)"
                                   : " (device to device: asynchronous to the host)");
  Item it = copy_item(api, dst, src, count, p, std::move(staged), std::move(item_site));
  if (!wait) {
    submit(s, std::move(it));
    return cudaSuccess;
  }
  thread_local VClock after;
  const uint64_t seq = submit(s, std::move(it), nullptr, &after);
  wait_and_observe(s, seq, after);
  return ret(device_error(s->device));
}

cudaError_t do_memset(const std::shared_ptr<const Site>& site, void* p, int value, size_t count, cudaStream_t stream,
                      bool sync_api) {
  const char* api = sync_api ? "cudaMemset" : "cudaMemsetAsync";
  cudaError_t e = cudaSuccess;
  StreamImpl* s = lookup_stream(stream, api, &e);
  if (!s) return ret(e);
  if (count == 0) return cudaSuccess;
  const MemClass c = classify(p);
  if (c.kind == MemKind::Pageable) {
    std::ostringstream m;
    m << api << "(" << p << ", " << value << ", " << count << " bytes): the target is " << mem_words(c.kind)
      << "; memset needs device memory (or pinned host memory).";
    report_violation(p ? "invalid pointer" : "null pointer", m.str());
    return ret(cudaErrorInvalidValue);
  }
  if (!check_range(p, count, std::string(api) + " target", /*allow_pinned=*/true)) return ret(cudaErrorInvalidValue);
  Item it;
  const bool mark = c.kind == MemKind::Device;
  it.work = [p, value, count, mark] {
    vgpu::kernel::raw_memset(p, value, count);
    if (mark) mark_initialized(p, count);
    return cudaSuccess;
  };
  it.site = sync_api && c.kind != MemKind::Pinned ? annotate(site, " (asynchronous to the host)") : site;
  it.self_contained = true;
  it.through_view0 = true;
  it.ranges.push_back({p, count, Access::Write});
  // "The synchronous memset functions are asynchronous with respect to the host except when the
  // target is pinned host memory ..., in which case they are fully synchronous. The Async versions
  // are always asynchronous with respect to the host."
  if (!(sync_api && c.kind == MemKind::Pinned)) {
    submit(s, std::move(it));
    return cudaSuccess;
  }
  thread_local VClock after;
  const uint64_t seq = submit(s, std::move(it), nullptr, &after);
  wait_and_observe(s, seq, after);
  return ret(device_error(s->device));
}

}  // namespace
}  // namespace rt
}  // namespace vgpu

// The synchronous forms run on the legacy default stream of the current device. Each entry point
// captures its own site (so the entry point's frame, not a tail call, marks where the caller begins).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  const auto site = vgpu::rt::make_site("cudaMemcpy");
  return vgpu::rt::do_copy(site, dst, src, count, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  const auto site = vgpu::rt::make_site("cudaMemcpyAsync");
  return vgpu::rt::do_copy(site, dst, src, count, kind, stream, false);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  const auto site = vgpu::rt::make_site("cudaMemset");
  return vgpu::rt::do_memset(site, devPtr, value, count, nullptr, true);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  const auto site = vgpu::rt::make_site("cudaMemsetAsync");
  return vgpu::rt::do_memset(site, devPtr, value, count, stream, false);
}
