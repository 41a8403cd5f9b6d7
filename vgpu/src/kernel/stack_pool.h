// Fiber stacks of one worker thread: one slot per CUDA thread of the largest block seen, reused by
// every block and launch (no allocation per thread), each with a guard page below it.
#pragma once
#include <cstddef>

namespace vgpu::kernel {

class StackPool {
 public:
  static constexpr size_t kStackBytes = size_t(64) << 10;
  static constexpr size_t kGuardBytes = 4096;
  static constexpr size_t kSlotBytes = kStackBytes + kGuardBytes;

  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool();

  // At least n slots; only while no fiber lives on the pool (between blocks).
  void reserve(size_t n);
  // Highest usable address of slot i and the bytes below it. Tops are staggered by a multiple of
  // 64 bytes so that the fibers' frames do not all fall into the same cache sets.
  char* top(size_t i) const { return base_ + (i + 1) * kSlotBytes - color(i); }
  size_t size(size_t i) const { return kStackBytes - color(i); }
  // Whether addr lies in a guard page of this pool (async-signal-safe): a stack overflow.
  bool in_guard(const void* addr) const;
  // The pool's whole extent (the access checks leave the fibers' own stacks alone).
  const char* lo() const { return base_; }
  const char* hi() const { return base_ + slots_ * kSlotBytes; }

 private:
  static size_t color(size_t i) { return (i % 64) * 64; }
  char* base_ = nullptr;
  size_t slots_ = 0;
};

}  // namespace vgpu::kernel
