#include "core/backend/cuda/device_allocator.h"

#include <fmt/format.h>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_guard.h"
#include "core/common/error.h"

#ifdef PTDP_VGPU
#include <vgpu/suballoc.h>
#endif

namespace ptdp::cuda {

DeviceAllocator& DeviceAllocator::for_device(int device) {
  static std::mutex mu;
  static std::map<int, DeviceAllocator*> all;  // never deleted: device memory goes with the process
  std::lock_guard<std::mutex> lock(mu);
  DeviceAllocator*& a = all[device];
  if (!a) a = new DeviceAllocator(device);
  return *a;
}

size_t DeviceAllocator::round_up(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t g = 512;
  while (g * 32 < bytes) g <<= 1;
  return (bytes + g - 1) / g * g;
}

bool DeviceAllocator::idle(const Block& b) {
  if (!b.freed) return true;
  const cudaError_t e = cudaEventQuery(b.freed);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  throw_cuda_error("cudaEventQuery(block freed event)", e, __FILE__, __LINE__);
}

void DeviceAllocator::recycle_event(cudaEvent_t e) {
  if (e) events_.push_back(e);
}

void* DeviceAllocator::allocate(size_t bytes, cudaStream_t stream) {
  const size_t n = round_up(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(n);
    if (it != free_.end()) {
      std::vector<Block>& v = it->second;
      size_t pick = v.size();
      for (size_t i = v.size(); i-- > 0 && pick == v.size();)
        if (stream && v[i].stream == stream) pick = i;  // stream order makes it safe
      for (size_t i = v.size(); i-- > 0 && pick == v.size();)
        if (idle(v[i])) pick = i;  // no work of any stream can still touch it
      if (pick < v.size()) {
        Block b = v[pick];
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(pick));
        cached_ -= n;
        recycle_event(b.freed);
        b.freed = nullptr;
        b.stream = stream;
#ifdef PTDP_VGPU
        b.ptr = vgpu::sub_allocate(b.ptr, bytes, stream);  // the block's memory under its new user's tag
#endif
        count_locked(b);
        live_[b.ptr] = b;
        return b.ptr;
      }
    }
  }
  DeviceGuard guard(device_);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, n);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    release_cached();
    e = cudaMalloc(&p, n);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError(fmt::format("cudaMalloc({} bytes) failed on device {}: {} ({} bytes in use, {} cached) at {}:{}",
                                   n, device_, cudaGetErrorString(e), bytes_in_use(), bytes_cached(), __FILE__,
                                   __LINE__));
  }
  std::lock_guard<std::mutex> lock(mu_);
#ifdef PTDP_VGPU
  p = vgpu::sub_allocate(p, bytes, stream);
#endif
  Block b{p, n, stream, nullptr};
  count_locked(b);
  live_[p] = b;
  return p;
}

void DeviceAllocator::count_locked(Block& b) {
  in_use_ += b.size;
  if (in_use_ > peak_) peak_ = in_use_;
  Usage& u = by_stream_[b.stream];
  u.in_use += b.size;
  if (u.in_use > u.peak) u.peak = u.in_use;
  b.counted = true;
}

void DeviceAllocator::deallocate(void* p, size_t /*bytes*/) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not from this allocator
  Block b = it->second;
  live_.erase(it);
  in_use_ -= b.size;
  if (b.counted) by_stream_[b.stream].in_use -= b.size;
  b.counted = false;
#ifdef PTDP_VGPU
  vgpu::sub_free(b.ptr, b.stream);  // queued before the event below, which thus covers it
#endif
  if (b.stream) {
    // Runs from destructors: no throwing. A block whose free cannot be recorded (e.g. while
    // the process exits) is dropped rather than risked.
    cudaEvent_t e = nullptr;
    if (!events_.empty()) {
      e = events_.back();
      events_.pop_back();
    } else {
      int previous = 0;
      cudaGetDevice(&previous);
      cudaSetDevice(device_);
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) e = nullptr;
      cudaSetDevice(previous);
    }
    if (!e || cudaEventRecord(e, b.stream) != cudaSuccess) {
      cudaGetLastError();
      recycle_event(e);
      return;
    }
    b.freed = e;
  }
  cached_ += b.size;
#ifdef PTDP_VGPU
  quarantine_locked(b);
#else
  free_[b.size].push_back(b);
#endif
}

#ifdef PTDP_VGPU
void DeviceAllocator::quarantine_locked(Block b) {
  quarantine_.push_back(b);
  quarantined_ += b.size;
  const size_t cap = vgpu::sub_quarantine_bytes();
  constexpr size_t kMaxBlocks = 1024;  // and as many blocks (each holds its free's event)
  while (!quarantine_.empty() && (quarantined_ > cap || quarantine_.size() > kMaxBlocks)) {
    Block old = quarantine_.front();
    quarantine_.pop_front();
    quarantined_ -= old.size;
    free_[old.size].push_back(old);
  }
}
#endif

void DeviceAllocator::forget_stream(cudaStream_t stream) {
  if (!stream) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, b] : live_)
    if (b.stream == stream) {
      b.stream = nullptr;
      b.counted = false;  // its stream's usage goes with it
    }
  by_stream_.erase(stream);
  for (auto& [n, v] : free_)
    for (Block& b : v)
      if (b.stream == stream) b.stream = nullptr;  // its event has completed: the stream was synchronized
#ifdef PTDP_VGPU
  for (Block& b : quarantine_)
    if (b.stream == stream) b.stream = nullptr;
#endif
}

void DeviceAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  free_cached_locked();
}

void DeviceAllocator::free_cached_locked() {
  std::map<size_t, std::vector<Block>> blocks;
  blocks.swap(free_);
#ifdef PTDP_VGPU
  for (Block& b : quarantine_) blocks[b.size].push_back(b);
  quarantine_.clear();
  quarantined_ = 0;
#endif
  cached_ = 0;
  DeviceGuard guard(device_);
  for (auto& [n, v] : blocks)
    for (Block& b : v) {
      if (b.freed) {
        PTDP_CUDA_CHECK(cudaEventSynchronize(b.freed));
        recycle_event(b.freed);
      }
      PTDP_CUDA_CHECK(cudaFree(b.ptr));
    }
}

size_t DeviceAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t DeviceAllocator::peak_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

size_t DeviceAllocator::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_use_;
}

DeviceAllocator::Usage DeviceAllocator::usage(cudaStream_t stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_stream_.find(stream);
  return it == by_stream_.end() ? Usage{} : it->second;
}

size_t DeviceAllocator::bytes_in_use(cudaStream_t stream) const { return usage(stream).in_use; }
size_t DeviceAllocator::peak_bytes_in_use(cudaStream_t stream) const { return usage(stream).peak; }

void DeviceAllocator::reset_peak(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_stream_.find(stream);
  if (it != by_stream_.end()) it->second.peak = it->second.in_use;
}

}  // namespace ptdp::cuda
