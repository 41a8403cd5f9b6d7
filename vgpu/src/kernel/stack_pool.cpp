// Fiber stacks of one worker thread (see stack_pool.h): one anonymous mapping, a guard page per slot.
#include "kernel/stack_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vgpu::kernel {
namespace {

constexpr int kMadvGuardInstall = 102;  // Linux 6.13+: guard pages without splitting the mapping

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "vgpu: %s failed for the kernel executor's fiber stacks: %s\n", what, std::strerror(errno));
  std::abort();
}

}  // namespace

StackPool::~StackPool() {
  if (base_) munmap(base_, slots_ * kSlotBytes);
}

void StackPool::reserve(size_t n) {
  if (n <= slots_) return;
  if (base_) munmap(base_, slots_ * kSlotBytes);
  size_t slots = n < 256 ? 256 : n;
  void* p = mmap(nullptr, slots * kSlotBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) die("mmap");
  base_ = static_cast<char*>(p);
  slots_ = slots;
  // Lightweight guard regions keep the mapping one VMA; older kernels get mprotect (two VMAs a slot).
  bool light = madvise(base_, kGuardBytes, kMadvGuardInstall) == 0;
  for (size_t i = light ? 1 : 0; i < slots_; ++i) {
    char* g = base_ + i * kSlotBytes;
    if (light ? madvise(g, kGuardBytes, kMadvGuardInstall) != 0 : mprotect(g, kGuardBytes, PROT_NONE) != 0)
      die(light ? "madvise(MADV_GUARD_INSTALL)" : "mprotect");
  }
}

bool StackPool::in_guard(const void* addr) const {
  const auto a = reinterpret_cast<uintptr_t>(addr), b = reinterpret_cast<uintptr_t>(base_);
  if (!base_ || a < b || a >= b + slots_ * kSlotBytes) return false;
  return (a - b) % kSlotBytes < kGuardBytes;
}

}  // namespace vgpu::kernel
