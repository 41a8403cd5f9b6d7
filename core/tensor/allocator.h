// Caching allocator: freed blocks are kept by size and handed out again, so the
// per-microbatch activations of every iteration reuse memory instead of paging it in anew.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace ptdp {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
};

// Host memory, 64-byte aligned, cached per rounded size. Thread-safe.
class CachingHostAllocator final : public Allocator {
 public:
  ~CachingHostAllocator() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void release_cached();             // returns every cached block to the system
  size_t bytes_in_use() const;       // allocated and not yet freed
  size_t peak_bytes_in_use() const;  // high-water mark of bytes_in_use
  void reset_peak();

  static CachingHostAllocator& instance();

 private:
  static size_t round_up(size_t bytes);
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t in_use_ = 0, peak_ = 0;
};

}  // namespace ptdp
