// A kernel that crashes (SIGSEGV) names itself, its block and its thread before the process dies;
// a fiber stack overflow is recognised as one.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernel/executor.h"

namespace {

__global__ void bad_store(int* p) {
  if (blockIdx.x == 2 && threadIdx.x == 5) *p = 1;  // planted: p points into the unmapped first page
}

TEST(KernelCrashDeathTest, SegfaultNamesKernelBlockAndThread) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_DEATH(vgpu::kernel::run_kernel_sync("bad_store", 4, 32, bad_store, reinterpret_cast<int*>(uintptr_t(64))),
               "vgpu: kernel bad_store crashed with SIGSEGV \\(invalid memory access\\) at address 0x40 in block "
               "\\(2,0,0\\), thread \\(5,0,0\\)");
}

__device__ __attribute__((noinline)) int deep(volatile int* p, int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth == 0) return frame[0];
  return deep(p, depth - 1) + frame[0] + *p;
}

__global__ void recurse(int* out, int depth) {
  volatile int zero = 0;
  out[threadIdx.x] = deep(&zero, depth);
}

TEST(KernelCrashDeathTest, StackOverflowIsRecognised) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  int out[32];
  // 32 levels of 1 KiB frames fit in a fiber stack; 200 do not.
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("recurse", 1, 32, recurse, out, 32), cudaSuccess);
  EXPECT_DEATH(vgpu::kernel::run_kernel_sync("recurse", 1, 32, recurse, out, 200),
               "kernel recurse crashed with SIGSEGV .* in block \\(0,0,0\\), thread \\(0,0,0\\): the address is in "
               "the guard page below a fiber stack, so the thread overflowed its 64 KiB stack");
}

}  // namespace
