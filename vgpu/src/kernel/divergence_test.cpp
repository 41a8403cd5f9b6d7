// Planted barrier and warp divergence, deadlocks and exceptions are reported as violations and
// stop the kernel with cudaErrorLaunchFailure; later blocks do not run.
#include <gtest/gtest.h>
#include <vgpu/runtime.h>

#include <string>
#include <vector>

#include "kernel/executor.h"
#include "runtime/test_util.h"

namespace {

using vgpu_test::joined;


__global__ void early_return_then_barrier(int* ran) {
  ran[blockIdx.x] = 1;
  if (threadIdx.x >= 224) return;
  __syncthreads();
}

TEST(KernelDivergence, BarrierAfterEarlyReturnIsReported) {
  vgpu::CaptureViolations cap;
  std::vector<int> ran(8, 0);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("early_return_then_barrier", 8, 256, early_return_then_barrier, ran.data()),
            cudaErrorLaunchFailure);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "barrier divergence: __syncthreads() at ")) << m[0];
  EXPECT_TRUE(vgpu_test::any_contains(m, "was reached by 224 of 256 threads of block (0,0,0) of kernel early_return_then_barrier")) << m[0];
  EXPECT_TRUE(vgpu_test::any_contains(m, "32 threads had returned (threads 224-255)")) << m[0];
  EXPECT_TRUE(vgpu_test::any_contains(m, "divergence_test.cpp:")) << m[0];
  EXPECT_EQ(ran[0], 1);
  EXPECT_EQ(ran[1], 0);  // the kernel stopped at the first bad block
}

__global__ void barriers_at_two_places(int*) {
  if (threadIdx.x % 2)
    __syncthreads();
  else
    __syncthreads();
}

TEST(KernelDivergence, BarriersAtDifferentPlacesAreReported) {
  vgpu::CaptureViolations cap;
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("barriers_at_two_places", 1, 64, barriers_at_two_places, nullptr),
            cudaErrorLaunchFailure);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "barrier divergence: the threads of block (0,0,0) of kernel barriers_at_two_places reached "
                     "different __syncthreads() calls: 32 threads"))
      << m[0];
}

template <class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void lane_returns_before_shuffle(float* out) {
  if (threadIdx.x % 32 == 5) return;
  out[threadIdx.x] = warp_sum(1.0f);
}

TEST(KernelDivergence, ShuffleWithAnExitedLaneIsReported) {
  for (auto order : {vgpu::ThreadOrder::Forward, vgpu::ThreadOrder::Reverse}) {
    const auto saved = vgpu::thread_order();
    vgpu::set_thread_order(order, 1);
    vgpu::CaptureViolations cap;
    std::vector<float> out(64);
    EXPECT_EQ(vgpu::kernel::run_kernel_sync("lane_returns_before_shuffle", 1, 64, lane_returns_before_shuffle,
                                            out.data()),
              cudaErrorLaunchFailure);
    vgpu::set_thread_order(saved, 1);
    const auto m = cap.messages();
    ASSERT_EQ(m.size(), 1u) << joined(m);
    EXPECT_TRUE(vgpu_test::any_contains(m, "warp divergence: ")) << m[0];
    EXPECT_TRUE(vgpu_test::any_contains(m, "__shfl_xor_sync")) << m[0];
    EXPECT_TRUE(vgpu_test::any_contains(m, "(lane 5 of warp ")) << m[0];
  }
}

__global__ void short_warp_shuffle(float* out) { out[threadIdx.x] = warp_sum(1.0f); }

TEST(KernelDivergence, FullMaskShuffleInAShortWarpIsReported) {
  vgpu::CaptureViolations cap;
  std::vector<float> out(48);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("short_warp_shuffle", 1, 48, short_warp_shuffle, out.data()),
            cudaErrorLaunchFailure);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "the mask names lanes 16-31, which do not exist: warp 1 has only 16 threads")) << m[0];
}

__global__ void lane_outside_mask(float* out) { out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1.0f, 0); }

TEST(KernelDivergence, LaneOutsideItsMaskIsReported) {
  vgpu::CaptureViolations cap;
  std::vector<float> out(32);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("lane_outside_mask", 1, 32, lane_outside_mask, out.data()),
            cudaErrorLaunchFailure);
  EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "the calling lane is not named in the mask")) << joined(cap.messages());
}

__global__ void shuffle_versus_barrier(float* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = warp_sum(1.0f);
  else
    __syncthreads();
}

TEST(KernelDivergence, DeadlockDescribesWhereEachThreadWaits) {
  vgpu::CaptureViolations cap;
  std::vector<float> out(64);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("shuffle_versus_barrier", 1, 64, shuffle_versus_barrier, out.data()),
            cudaErrorLaunchFailure);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "deadlock: no thread of block (0,0,0) of kernel shuffle_versus_barrier can proceed: threads "
                     "0-15 wait in __shfl_xor_sync(mask 0xffffffff) at "))
      << m[0];
  EXPECT_TRUE(vgpu_test::any_contains(m, "; threads 16-63 wait in __syncthreads() at ")) << m[0];
}

__global__ void mismatched_masks(float* out) {
  const unsigned mask = threadIdx.x == 3 ? 0x0000000fu : 0xffffffffu;
  out[threadIdx.x] = __shfl_xor_sync(mask, 1.0f, 1);
}

TEST(KernelDivergence, LanesDisagreeingOnTheMaskAreReported) {
  vgpu::CaptureViolations cap;
  std::vector<float> out(32);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("mismatched_masks", 1, 32, mismatched_masks, out.data()),
            cudaErrorLaunchFailure);
  EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "warp divergence: the lanes of warp 0 of block (0,0,0) of kernel mismatched_masks "
                                  "disagree"))
      << joined(cap.messages());
}

__global__ void throws_in_thread(int*) {
  if (threadIdx.x == 9) throw std::runtime_error("device code threw");
}

TEST(KernelDivergence, ExceptionEscapingAThreadIsReported) {
  vgpu::CaptureViolations cap;
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("throws_in_thread", 1, 32, throws_in_thread, nullptr),
            cudaErrorLaunchFailure);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "kernel exception: an exception escaped thread (9,0,0)")) << m[0];
  EXPECT_TRUE(vgpu_test::any_contains(m, "device code threw")) << m[0];
  // The executor is usable afterwards.
  std::vector<float> out(32);
  EXPECT_EQ(vgpu::kernel::run_kernel_sync("short_warp_shuffle", 1, 32, short_warp_shuffle, out.data()), cudaSuccess);
  EXPECT_EQ(out[31], 32.0f);
}

TEST(KernelDivergence, BarrierOutsideAKernelIsReported) {
  vgpu::CaptureViolations cap;
  __syncthreads();
  EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "device function outside a kernel: __syncthreads() called at "))
      << joined(cap.messages());
}

}  // namespace
