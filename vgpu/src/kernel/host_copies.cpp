// The C library's memcpy, memmove and memset (and their _FORTIFY_SOURCE forms), replaced in every
// program linked with the vgpu: GCC's instrumentation does not see these calls, so the host copying
// device memory with memcpy, or a pinned buffer that a stream's unfinished copy fills, would pass
// unchecked. Each call whose source or destination lies in device or pinned memory
// (runtime/arena.h, one comparison) goes through the same check as an instrumented load or store
// (kernel::host_access), then to the C library's own function (dlsym(RTLD_NEXT)); stream workers,
// which copy device memory on the runtime's behalf, are exempt. The vgpu's own code calls the C
// library directly (raw_memory.h).
#include <dlfcn.h>

#include <atomic>
#include <cstddef>

#include "kernel/access_check.h"
#include "kernel/raw_memory.h"
#include "runtime/arena.h"

namespace {

using CopyFn = void* (*)(void*, const void*, size_t);
using SetFn = void* (*)(void*, int, size_t);

// Until the C library's functions are found (calls made while dlsym itself runs, or before): plain
// loops through volatile pointers, which the compiler cannot turn back into calls of these.
void* loop_copy(void* d, const void* s, size_t n) {
  auto* dst = static_cast<volatile unsigned char*>(d);
  const auto* src = static_cast<const volatile unsigned char*>(s);
  if (dst < src) {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    for (size_t i = n; i-- > 0;) dst[i] = src[i];
  }
  return d;
}
void* loop_set(void* d, int c, size_t n) {
  auto* dst = static_cast<volatile unsigned char*>(d);
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<unsigned char>(c);
  return d;
}

constinit thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

template <class F> F libc(std::atomic<F>& slot, const char* name, F fallback) {
  if (F f = slot.load(std::memory_order_acquire)) return f;
  if (t_resolving) return fallback;
  t_resolving = true;
  auto f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  t_resolving = false;
  if (!f) return fallback;
  slot.store(f, std::memory_order_release);
  return f;
}

std::atomic<CopyFn> g_memcpy{nullptr}, g_memmove{nullptr};
std::atomic<SetFn> g_memset{nullptr};

inline bool touches_arenas(const void* a, const void* b) {
  return __builtin_expect(vgpu::rt::in_arenas(a) || vgpu::rt::in_arenas(b), 0);
}

[[gnu::noinline]] void check_copy(void* d, const void* s, size_t n, const void* pc, const char* fn) {
  if (n == 0 || vgpu::kernel::t_vgpu_thread) return;
  if (vgpu::rt::in_arenas(s)) vgpu::kernel::host_access(s, n, vgpu::kernel::kRead, pc, fn);
  if (vgpu::rt::in_arenas(d)) vgpu::kernel::host_access(d, n, vgpu::kernel::kWrite, pc, fn);
}

}  // namespace

namespace vgpu::kernel {
// Through view 0 (runtime/arena.h), which device memory's protection leaves open to the runtime
// (runtime/protect.h): no fault, nothing to open and close. The pointer returned is the caller's.
void* raw_memcpy(void* d, const void* s, size_t n) {
  libc(g_memcpy, "memcpy", loop_copy)(rt::untag(d), rt::untag(s), n);
  return d;
}
void* raw_memmove(void* d, const void* s, size_t n) {
  libc(g_memmove, "memmove", loop_copy)(rt::untag(d), rt::untag(s), n);
  return d;
}
void* raw_memset(void* d, int c, size_t n) {
  libc(g_memset, "memset", loop_set)(rt::untag(d), c, n);
  return d;
}
}  // namespace vgpu::kernel

extern "C" {
void* memcpy(void* d, const void* s, size_t n) {
  if (touches_arenas(d, s)) check_copy(d, s, n, __builtin_return_address(0), "memcpy");
  return vgpu::kernel::raw_memcpy(d, s, n);
}
void* memmove(void* d, const void* s, size_t n) {
  if (touches_arenas(d, s)) check_copy(d, s, n, __builtin_return_address(0), "memmove");
  return vgpu::kernel::raw_memmove(d, s, n);
}
void* memset(void* d, int c, size_t n) {
  if (touches_arenas(d, nullptr)) check_copy(d, nullptr, n, __builtin_return_address(0), "memset");
  return vgpu::kernel::raw_memset(d, c, n);
}
// glibc's checked forms (-D_FORTIFY_SOURCE): the destination's size is checked by the C library.
void* __memcpy_chk(void* d, const void* s, size_t n, size_t dn) {
  using Fn = void* (*)(void*, const void*, size_t, size_t);
  static std::atomic<Fn> real{nullptr};
  if (touches_arenas(d, s)) check_copy(d, s, n, __builtin_return_address(0), "memcpy");
  if (Fn f = libc(real, "__memcpy_chk", static_cast<Fn>(nullptr))) return f(d, s, n, dn);
  return vgpu::kernel::raw_memcpy(d, s, n);
}
void* __memmove_chk(void* d, const void* s, size_t n, size_t dn) {
  using Fn = void* (*)(void*, const void*, size_t, size_t);
  static std::atomic<Fn> real{nullptr};
  if (touches_arenas(d, s)) check_copy(d, s, n, __builtin_return_address(0), "memmove");
  if (Fn f = libc(real, "__memmove_chk", static_cast<Fn>(nullptr))) return f(d, s, n, dn);
  return vgpu::kernel::raw_memmove(d, s, n);
}
void* __memset_chk(void* d, int c, size_t n, size_t dn) {
  using Fn = void* (*)(void*, int, size_t, size_t);
  static std::atomic<Fn> real{nullptr};
  if (touches_arenas(d, nullptr)) check_copy(d, nullptr, n, __builtin_return_address(0), "memset");
  if (Fn f = libc(real, "__memset_chk", static_cast<Fn>(nullptr))) return f(d, c, n, dn);
  return vgpu::kernel::raw_memset(d, c, n);
}
}  // extern "C"
