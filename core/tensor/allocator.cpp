#include "core/tensor/allocator.h"

#include <cstdlib>
#include <new>

namespace ptdp {

size_t CachingHostAllocator::round_up(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + 511) & ~size_t{511};
}

void* CachingHostAllocator::allocate(size_t bytes) {
  size_t n = round_up(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ += n;
    if (in_use_ > peak_) peak_ = in_use_;
    auto it = free_.find(n);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
  }
  void* p = std::aligned_alloc(64, n);
  if (!p) {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= n;
    throw std::bad_alloc();
  }
  return p;
}

void CachingHostAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  size_t n = round_up(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= n;
  free_[n].push_back(p);
}

void CachingHostAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, v] : free_)
    for (void* p : v) std::free(p);
  free_.clear();
}

size_t CachingHostAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t CachingHostAllocator::peak_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

void CachingHostAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_use_;
}

CachingHostAllocator::~CachingHostAllocator() { release_cached(); }

CachingHostAllocator& CachingHostAllocator::instance() {
  static CachingHostAllocator a;
  return a;
}

}  // namespace ptdp
