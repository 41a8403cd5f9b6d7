// Caching device allocator, one per GPU, shared by every backend on it. Freed blocks are
// kept by rounded size. A block remembers the stream it was allocated for: it goes back to
// that stream at once (stream order keeps it safe), and to another stream only after an
// event recorded at its free has completed, so work still queued on the first stream can
// never see its memory reused. Thread-safe.
//
// Built for the virtual GPU (PTDP_VGPU), the allocator tells the vgpu each tensor's exact extent
// and lifetime (vgpu/suballoc.h): a tensor's bytes are checked as if it had its own cudaMalloc
// (bounds, poison and uninitialised until written, use after free, reuse racing with another
// stream), and freed blocks wait in a quarantine (vgpu::sub_quarantine_bytes()) before reuse so
// that stale pointers meet freed memory.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/tensor/allocator.h"

namespace ptdp::cuda {

class DeviceAllocator final : public Allocator {
 public:
  // The allocator of `device`; it lives until the process exits.
  static DeviceAllocator& for_device(int device);

  // Memory for work on `stream`, freed (by a Storage) when the last tensor over it goes.
  void* allocate(size_t bytes, cudaStream_t stream);
  // Without a stream: only blocks known idle are handed out, and the caller orders its own
  // use of the memory (nothing is recorded at its free).
  void* allocate(size_t bytes) override { return allocate(bytes, nullptr); }
  void deallocate(void* p, size_t bytes) override;

  // Called by a backend that has synchronized `stream` and is about to destroy it: its
  // blocks become idle blocks of no stream.
  void forget_stream(cudaStream_t stream);
  // Waits for and frees every cached block (cudaFree).
  void release_cached();

  size_t bytes_in_use() const;       // handed out and not yet freed (rounded sizes)
  size_t peak_bytes_in_use() const;  // high-water mark of bytes_in_use since reset_peak
  size_t bytes_cached() const;       // freed and kept for reuse (the vgpu's quarantine included)
  void reset_peak();
  // The same for the blocks allocated for one stream (a backend's: thread ranks sharing a GPU each
  // have their own), until that stream is forgotten.
  size_t bytes_in_use(cudaStream_t stream) const;
  size_t peak_bytes_in_use(cudaStream_t stream) const;
  void reset_peak(cudaStream_t stream);
  int device() const { return device_; }

  static size_t round_up(size_t bytes);  // 512-byte multiples, then within 1/32 of the size

 private:
  explicit DeviceAllocator(int device) : device_(device) {}
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;             // rounded
    cudaStream_t stream = nullptr;
    cudaEvent_t freed = nullptr;  // recorded on `stream` at the free; null: idle
    bool counted = false;         // (live) in by_stream_[stream]
  };
  struct Usage {
    size_t in_use = 0, peak = 0;
  };
  void count_locked(Block& b);  // a block handed out for b.stream
  Usage usage(cudaStream_t stream) const;  // by_stream_'s entry (zeros for none), under mu_
  bool idle(const Block& b);          // the free-time event has completed (mu_ held)
  void recycle_event(cudaEvent_t e);  // (mu_ held)
  void free_cached_locked();

  const int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<Block>> free_;
  std::unordered_map<void*, Block> live_;
  std::vector<cudaEvent_t> events_;  // recorded-and-done events for reuse
#ifdef PTDP_VGPU
  void quarantine_locked(Block b);  // frees wait here before free_ (oldest leave first)
  std::deque<Block> quarantine_;
  size_t quarantined_ = 0;
#endif
  size_t in_use_ = 0, peak_ = 0, cached_ = 0;
  std::unordered_map<cudaStream_t, Usage> by_stream_;
};

}  // namespace ptdp::cuda
