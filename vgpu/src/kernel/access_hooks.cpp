// The entry points that GCC's (and Clang's) -fsanitize=thread instrumentation calls at every load,
// store and atomic of the CUDA sources of a vgpu build. ThreadSanitizer's runtime is not linked:
// these forward each access to the kernel's AccessTracker while a kernel runs on this thread;
// otherwise they only check that the host is not touching device memory, nor pinned memory that a
// stream's unfinished work uses (access_check.h). A
// kernel's stores, and its loads of device or pinned memory, are also logged (AccessLog) for the
// race checker. The atomics perform the operation themselves.
// Not compiled with the instrumentation (it would call itself).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernel/access_check.h"
#include "kernel/shared_memory.h"
#include "runtime/arena.h"

namespace {
using vgpu::kernel::AccessTracker;
using vgpu::kernel::t_access_tracker;

// The tracked access, out of line: the hooks' common paths (checks off, or the host touching its
// own memory) then need no stack frame.
[[gnu::noinline]] void tracked(const void* p, size_t n, unsigned flags, const void* pc, AccessTracker* t) {
  t_access_tracker = nullptr;  // what the check itself runs is not checked
  t->access(p, n, flags, pc);
  t_access_tracker = t;
}

inline __attribute__((always_inline)) void note(const volatile void* vp, size_t n, unsigned flags, const void* pc) {
  const void* p = const_cast<const void*>(vp);
  if (flags & vgpu::kernel::kWrite) {
    vgpu::kernel::note_shared_write(p, n);
    // The race checker asks only about device and pinned memory: not the kernel's arguments,
    // locals and __shared__ variables.
    if (vgpu::kernel::AccessLog* w = vgpu::kernel::t_write_log; w && vgpu::rt::in_arenas(p)) w->add(p, n);
  } else if (vgpu::kernel::AccessLog* r = vgpu::kernel::t_read_log) {
    if (vgpu::rt::in_arenas(p)) r->add(p, n);  // not the kernel's arguments and locals
  }
  if (AccessTracker* t = t_access_tracker; __builtin_expect(t != nullptr, 0)) return tracked(p, n, flags, pc, t);
  // Stream workers (where unchecked kernels run) touch device memory on the runtime's behalf.
  if (__builtin_expect(vgpu::rt::in_arenas(p), 0) && !vgpu::kernel::t_vgpu_thread)
    vgpu::kernel::host_access(p, n, flags, pc);
}
#define VGPU_PC __builtin_return_address(0)
}  // namespace

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void** p, void*) { note(p, sizeof(void*), vgpu::kernel::kWrite, VGPU_PC); }
void __tsan_vptr_read(void** p) { note(p, sizeof(void*), vgpu::kernel::kRead, VGPU_PC); }

#define VGPU_RW_(N)                                                                                          \
  void __tsan_read##N(void* p) { note(p, N, vgpu::kernel::kRead, VGPU_PC); }                                 \
  void __tsan_write##N(void* p) { note(p, N, vgpu::kernel::kWrite, VGPU_PC); }                               \
  void __tsan_unaligned_read##N(void* p) { note(p, N, vgpu::kernel::kRead, VGPU_PC); }                       \
  void __tsan_unaligned_write##N(void* p) { note(p, N, vgpu::kernel::kWrite, VGPU_PC); }                     \
  void __tsan_volatile_read##N(void* p) { note(p, N, vgpu::kernel::kRead, VGPU_PC); }                        \
  void __tsan_volatile_write##N(void* p) { note(p, N, vgpu::kernel::kWrite, VGPU_PC); }                      \
  void __tsan_unaligned_volatile_read##N(void* p) { note(p, N, vgpu::kernel::kRead, VGPU_PC); }              \
  void __tsan_unaligned_volatile_write##N(void* p) { note(p, N, vgpu::kernel::kWrite, VGPU_PC); }
VGPU_RW_(1)
VGPU_RW_(2)
VGPU_RW_(4)
VGPU_RW_(8)
VGPU_RW_(16)
#undef VGPU_RW_
void __tsan_read_range(void* p, size_t n) { note(p, n, vgpu::kernel::kRead, VGPU_PC); }
void __tsan_write_range(void* p, size_t n) { note(p, n, vgpu::kernel::kWrite, VGPU_PC); }
// Clang replaces memcpy, memmove and memset by these.
void* __tsan_memcpy(void* d, const void* s, size_t n) {
  note(s, n, vgpu::kernel::kRead, VGPU_PC);
  note(d, n, vgpu::kernel::kWrite, VGPU_PC);
  return std::memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, size_t n) {
  note(s, n, vgpu::kernel::kRead, VGPU_PC);
  note(d, n, vgpu::kernel::kWrite, VGPU_PC);
  return std::memmove(d, s, n);
}
void* __tsan_memset(void* d, int c, size_t n) {
  note(d, n, vgpu::kernel::kWrite, VGPU_PC);
  return std::memset(d, c, n);
}

// Atomics (ThreadSanitizer's interface: the memory order as an int, as __ATOMIC_*). Every
// operation runs sequentially consistent, which is at least what was asked for.
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define VGPU_RMW_(N, T, OP)                                                                       \
  T __tsan_atomic##N##_##OP(volatile T* a, T v, int) {                                            \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                    \
    return __atomic_##OP(a, v, __ATOMIC_SEQ_CST);                                                 \
  }
#define VGPU_ATOMICS_(N, T)                                                                         \
  T __tsan_atomic##N##_load(const volatile T* a, int) {                                             \
    note(a, sizeof(T), vgpu::kernel::kRead | vgpu::kernel::kAtomic, VGPU_PC);                       \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                 \
  void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                          \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                      \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                 \
  T __tsan_atomic##N##_exchange(volatile T* a, T v, int) {                                          \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                      \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                             \
  }                                                                                                 \
  VGPU_RMW_(N, T, fetch_add)                                                                        \
  VGPU_RMW_(N, T, fetch_sub)                                                                        \
  VGPU_RMW_(N, T, fetch_and)                                                                        \
  VGPU_RMW_(N, T, fetch_or)                                                                         \
  VGPU_RMW_(N, T, fetch_xor)                                                                        \
  VGPU_RMW_(N, T, fetch_nand)                                                                       \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {              \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                      \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                 \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                      \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);          \
  }                                                                                                 \
  T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                    \
    note(a, sizeof(T), vgpu::kernel::kWrite | vgpu::kernel::kAtomic, VGPU_PC);                      \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
    return c;                                                                                       \
  }
VGPU_ATOMICS_(8, int8_t)
VGPU_ATOMICS_(16, int16_t)
VGPU_ATOMICS_(32, int32_t)
VGPU_ATOMICS_(64, int64_t)
#undef VGPU_ATOMICS_
#undef VGPU_RMW_
}  // extern "C"
