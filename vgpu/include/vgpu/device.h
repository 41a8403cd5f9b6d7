// vgpu: the kernel-side CUDA language for host compilation (included at the end of cuda_runtime.h):
// qualifiers, built-in index variables, barriers, warp shuffles and votes, atomics, device math.
// Each CUDA thread runs as a fiber on the stream's worker thread (src/kernel/executor.cpp).
#pragma once
#include <cuda_runtime.h>
#include <math.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

// ---- Function and variable qualifiers ----
// Host compilation: every function is a host function, so __global__/__device__/__host__ vanish.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
// (No __noinline__: libstdc++ spells __attribute__((__noinline__)), which such a macro would break.)
#define __launch_bounds__(...)
// __shared__ variables are per block. A worker thread runs one block at a time and all fibers of
// that block run on it, so a function-local thread_local is exactly "one copy per running block".
// The abi_tag puts "vgpu_shared" into each one's symbol name: the executor finds them in the
// executable's symbol table and poisons them (0xFF) before every block, as the contents of shared
// memory at a block's start are undefined (src/kernel/shared_memory.h).
// Each variable comes with a 64-byte red zone, declared first: GCC lays a function's thread-locals
// out in reverse order, so the red zone follows the variable, and an index past one __shared__
// array lands in it rather than in the next array (the access checks report any access to
// thread-local storage outside every __shared__ variable; vgpu::unguarded_shared_variables() names
// any variable no red zone follows).
// (Dynamic shared memory, `extern __shared__ T x[]`, is not supported.)
#define VGPU_CAT2_(a, b) a##b
#define VGPU_CAT_(a, b) VGPU_CAT2_(a, b)
#define __shared__                                                                                   \
  __attribute__((abi_tag("vgpu_redzone"), used)) static thread_local char VGPU_CAT_(vgpu_redzone_, \
                                                                                    __COUNTER__)[64]; \
  __attribute__((abi_tag("vgpu_shared"))) static thread_local
#define __constant__

// ---- Built-in variables (CUDA C++ Programming Guide, "Built-in Variables") ----
// Plain thread_local variables that the executor sets for the running fiber on every switch
// (threadIdx) and once per block (blockIdx, blockDim, gridDim). initial-exec: one %fs-relative
// access, valid because the vgpu is linked into the executable or a library loaded at start-up.
#define VGPU_TLS_ __attribute__((tls_model("initial-exec"))) inline thread_local
VGPU_TLS_ uint3 threadIdx{0, 0, 0};
VGPU_TLS_ uint3 blockIdx{0, 0, 0};
VGPU_TLS_ dim3 blockDim{1, 1, 1};
VGPU_TLS_ dim3 gridDim{1, 1, 1};
#undef VGPU_TLS_
inline constexpr int warpSize = 32;

// ---- Services of the executor (src/kernel/executor.cpp) ----
namespace vgpu::detail {
enum class WarpOp : unsigned char { Sync, Ballot, Idx, Up, Down, Xor };
enum class BarrierOp : unsigned char { Sync, Count, And, Or };
// Waits until every thread of the block arrives; returns the count of non-zero predicates.
int block_barrier(BarrierOp op, int predicate, std::source_location where);
// Waits until every lane named in mask arrives; returns the value this lane receives
// (shuffles), the ballot of predicates (Ballot) or 0 (Sync).
uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t value, int arg, int width, std::source_location where);
// A kernel's vector access of `bytes` at p that is not `bytes`-aligned: a GPU stops the kernel with
// cudaErrorMisalignedAddress, so the vgpu reports it (a violation, "misaligned address"); a
// kernel's code calls it where it makes such an access (core/backend/cuda/device_types.cuh's
// packs). Nothing outside a kernel.
void misaligned_access(const void* p, size_t bytes);

template <class T>
inline T warp_shuffle(WarpOp op, unsigned mask, T var, int arg, int width, std::source_location where) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles move 4 or 8 bytes");
  uint64_t raw = 0;
  std::memcpy(&raw, &var, sizeof(T));
  raw = warp_exchange(op, mask, raw, arg, width, where);
  std::memcpy(&var, &raw, sizeof(T));
  return var;
}

// CUDA's atomics are relaxed read-modify-writes on global or shared memory; blocks of different
// kernels run on different OS threads, so they must be real atomics (std::atomic_ref).
template <class T> inline std::atomic_ref<T> atomic_at(T* p) { return std::atomic_ref<T>(*p); }
template <class T, class F> inline T atomic_update(T* p, F f) {  // CAS loop: returns the old value
  std::atomic_ref<T> a(*p);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, f(old), std::memory_order_relaxed)) {
  }
  return old;
}
}  // namespace vgpu::detail

// ---- Synchronization functions (Programming Guide, "Synchronization Functions") ----
inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ::vgpu::detail::block_barrier(::vgpu::detail::BarrierOp::Sync, 0, where);
}
inline int __syncthreads_count(int predicate, std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::block_barrier(::vgpu::detail::BarrierOp::Count, predicate, where);
}
inline int __syncthreads_and(int predicate, std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::block_barrier(::vgpu::detail::BarrierOp::And, predicate, where) != 0;
}
inline int __syncthreads_or(int predicate, std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::block_barrier(::vgpu::detail::BarrierOp::Or, predicate, where) != 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location where = std::source_location::current()) {
  ::vgpu::detail::warp_exchange(::vgpu::detail::WarpOp::Sync, mask, 0, 0, warpSize, where);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- Warp vote and shuffle functions (Programming Guide, "Warp Vote Functions", "Warp Shuffle Functions") ----
inline unsigned __ballot_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  return static_cast<unsigned>(
      ::vgpu::detail::warp_exchange(::vgpu::detail::WarpOp::Ballot, mask, predicate != 0, 0, warpSize, where));
}
inline int __all_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) == mask;
}
inline int __any_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) != 0;
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize,
                     std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::warp_shuffle(::vgpu::detail::WarpOp::Idx, mask, var, srcLane, width, where);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                        std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::warp_shuffle(::vgpu::detail::WarpOp::Up, mask, var, static_cast<int>(delta), width, where);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                          std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::warp_shuffle(::vgpu::detail::WarpOp::Down, mask, var, static_cast<int>(delta), width, where);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize,
                         std::source_location where = std::source_location::current()) {
  return ::vgpu::detail::warp_shuffle(::vgpu::detail::WarpOp::Xor, mask, var, laneMask, width, where);
}

// ---- Atomic functions (Programming Guide, "Atomic Functions"): return the old value ----
inline int atomicAdd(int* p, int v) { return ::vgpu::detail::atomic_at(p).fetch_add(v, std::memory_order_relaxed); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).fetch_add(v, std::memory_order_relaxed);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return ::vgpu::detail::atomic_at(p).fetch_add(v, std::memory_order_relaxed);
}
inline float atomicAdd(float* p, float v) { return ::vgpu::detail::atomic_at(p).fetch_add(v, std::memory_order_relaxed); }
inline double atomicAdd(double* p, double v) {
  return ::vgpu::detail::atomic_at(p).fetch_add(v, std::memory_order_relaxed);
}
inline int atomicSub(int* p, int v) { return ::vgpu::detail::atomic_at(p).fetch_sub(v, std::memory_order_relaxed); }
inline unsigned atomicSub(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).fetch_sub(v, std::memory_order_relaxed);
}
inline int atomicExch(int* p, int v) { return ::vgpu::detail::atomic_at(p).exchange(v, std::memory_order_relaxed); }
inline unsigned atomicExch(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).exchange(v, std::memory_order_relaxed);
}
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return ::vgpu::detail::atomic_at(p).exchange(v, std::memory_order_relaxed);
}
inline float atomicExch(float* p, float v) { return ::vgpu::detail::atomic_at(p).exchange(v, std::memory_order_relaxed); }
inline int atomicCAS(int* p, int compare, int v) {
  ::vgpu::detail::atomic_at(p).compare_exchange_strong(compare, v, std::memory_order_relaxed);
  return compare;
}
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned v) {
  ::vgpu::detail::atomic_at(p).compare_exchange_strong(compare, v, std::memory_order_relaxed);
  return compare;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long compare, unsigned long long v) {
  ::vgpu::detail::atomic_at(p).compare_exchange_strong(compare, v, std::memory_order_relaxed);
  return compare;
}
#define VGPU_ATOMIC_MINMAX_(T)                                                                          \
  inline T atomicMax(T* p, T v) {                                                                      \
    return ::vgpu::detail::atomic_update(p, [v](T old) { return old < v ? v : old; });                 \
  }                                                                                                    \
  inline T atomicMin(T* p, T v) { return ::vgpu::detail::atomic_update(p, [v](T old) { return v < old ? v : old; }); }
VGPU_ATOMIC_MINMAX_(int)
VGPU_ATOMIC_MINMAX_(unsigned)
VGPU_ATOMIC_MINMAX_(long long)
VGPU_ATOMIC_MINMAX_(unsigned long long)
#undef VGPU_ATOMIC_MINMAX_
inline int atomicAnd(int* p, int v) { return ::vgpu::detail::atomic_at(p).fetch_and(v, std::memory_order_relaxed); }
inline unsigned atomicAnd(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).fetch_and(v, std::memory_order_relaxed);
}
inline int atomicOr(int* p, int v) { return ::vgpu::detail::atomic_at(p).fetch_or(v, std::memory_order_relaxed); }
inline unsigned atomicOr(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).fetch_or(v, std::memory_order_relaxed);
}
inline int atomicXor(int* p, int v) { return ::vgpu::detail::atomic_at(p).fetch_xor(v, std::memory_order_relaxed); }
inline unsigned atomicXor(unsigned* p, unsigned v) {
  return ::vgpu::detail::atomic_at(p).fetch_xor(v, std::memory_order_relaxed);
}

// ---- Device math: the C library's (expf, logf, tanhf, sqrtf, fmaxf, INFINITY... from math.h)
// plus CUDA's own names (CUDA Math API: single-precision intrinsics and integer intrinsics).
// Intrinsics compute the exact function here; the device's are faster and less accurate.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __int_as_float(int x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline float __uint_as_float(unsigned x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float x) {
  unsigned i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}
inline long long __double_as_longlong(double x) {
  long long i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
  return r;
}
template <class T> inline T __ldg(const T* p) { return *p; }
