// The thread order of the executor (vgpu::ThreadOrder, launch.h): the setting, read once from
// VGPU_THREAD_ORDER / VGPU_SEED, and the permutations it produces for blocks and fibers.
#pragma once
#include <vgpu/launch.h>

#include <cstdint>
#include <vector>

namespace vgpu::kernel {

struct OrderSetting {
  ThreadOrder order;
  uint64_t seed;
};
OrderSetting current_order();

// splitmix64: a small, well-mixed generator for the shuffle order.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t hash_name(const char* s);

// The k-th block to run out of `total`: k itself, reversed, or an affine permutation
// (a * k + b mod total, a coprime to total) drawn from the seed and the kernel's name.
class BlockOrder {
 public:
  BlockOrder(OrderSetting s, uint64_t name_hash, uint64_t total);
  uint64_t at(uint64_t k) const;

 private:
  ThreadOrder order_;
  uint64_t total_, a_ = 1, b_ = 0;
};

// Orders of the fibers of one block: all threads (start, release from __syncthreads) or the
// lanes of one warp (release from a warp operation).
class FiberOrder {
 public:
  void begin_block(OrderSetting s, uint64_t name_hash, uint64_t block);
  ThreadOrder order() const { return order_; }
  // Appends 0..n-1 to out in this order.
  template <class Push> void all(uint32_t n, Push push) {
    if (order_ == ThreadOrder::Forward) {
      for (uint32_t i = 0; i < n; ++i) push(i);
    } else if (order_ == ThreadOrder::Reverse) {
      for (uint32_t i = n; i-- > 0;) push(i);
    } else {
      shuffle(n);
      for (uint32_t i = 0; i < n; ++i) push(perm_[i]);
    }
  }
  // Calls push(lane) for each set bit of bits, in this order.
  template <class Push> void lanes(uint32_t bits, Push push) {
    if (order_ == ThreadOrder::Forward) {
      for (uint32_t b = bits; b; b &= b - 1) push(static_cast<uint32_t>(__builtin_ctz(b)));
    } else if (order_ == ThreadOrder::Reverse) {
      for (uint32_t b = bits; b; b &= ~(1u << (31 - __builtin_clz(b)))) push(static_cast<uint32_t>(31 - __builtin_clz(b)));
    } else {
      uint32_t l[32], n = 0;
      for (uint32_t b = bits; b; b &= b - 1) l[n++] = static_cast<uint32_t>(__builtin_ctz(b));
      for (uint32_t i = n; i > 1; --i) std::swap(l[i - 1], l[next() % i]);
      for (uint32_t i = 0; i < n; ++i) push(l[i]);
    }
  }

 private:
  uint64_t next() { return mix64(state_++); }
  void shuffle(uint32_t n);
  ThreadOrder order_ = ThreadOrder::Forward;
  uint64_t state_ = 0;
  std::vector<uint32_t> perm_;
};

}  // namespace vgpu::kernel
