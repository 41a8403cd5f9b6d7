// Shared memory is poisoned (0xFF) before every block (shared_memory.h): planted bugs that read
// shared memory a block did not write now see NaNs and -1s, not zeros or the previous block's
// values, so the tests that compare a kernel's results with the CPU fail on them.
#include <gtest/gtest.h>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel/shared_memory.h"

#define TEST_LAUNCH(grid, block, shmem, stream, ...) \
  ::vgpu::launch(#__VA_ARGS__, __FILE__, __LINE__, grid, block, shmem, stream, __VA_ARGS__)

namespace {

template <class T> std::vector<T> run(void (*launch)(T*, cudaStream_t), size_t n) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, n * sizeof(T)), cudaSuccess);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  launch(d, s);
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  cudaFree(d);
  return h;
}

// Planted: only block 0 fills the table; the other blocks read what block 0 left (on a GPU the
// blocks run on other SMs, or after other kernels: the contents are undefined).
__global__ void stale_table(int* out) {
  __shared__ int table[32];
  if (blockIdx.x == 0) table[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = table[threadIdx.x];
}

TEST(KernelSharedMemory, ABlockReadingSharedMemoryItDidNotWriteSeesPoison) {
  ASSERT_GT(vgpu::kernel::shared_variables_found(), 0) << "no __shared__ variable found: the poison is off";
  const auto out = run<int>([](int* d, cudaStream_t s) { TEST_LAUNCH(3, 32, 0, s, stale_table)(d); }, 96);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[32], -1) << "block 1 saw block 0's table";
  EXPECT_EQ(out[95], -1);
}

// Planted: a block reduction whose final step reads all 32 partial sums although a block of 64
// threads wrote only 2 (the usual bug: `lane < blockDim.x / 32 ? part[lane] : 0` forgotten).
// Zero-initialised thread-locals made the sum right; the poison makes it NaN.
__global__ void sum_reading_every_slot(float* out) {
  __shared__ float part[32];
  const float v = 1.0f;
  float w = v;
  for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = w;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = part[threadIdx.x];  // planted: slots 2..31 were never written
    for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) out[blockIdx.x] = t;
  }
}

TEST(KernelSharedMemory, AReductionReadingUnwrittenPartialSumsGivesNan) {
  const auto out = run<float>([](float* d, cudaStream_t s) { TEST_LAUNCH(2, 64, 0, s, sum_reading_every_slot)(d); }, 2);
  EXPECT_TRUE(std::isnan(out[0])) << out[0];
  EXPECT_TRUE(std::isnan(out[1])) << out[1];
}

// The same reduction written correctly is not disturbed.
__global__ void sum_correct(float* out) {
  __shared__ float part[32];
  float w = 1.0f;
  for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = w;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) out[blockIdx.x] = t;
  }
}

TEST(KernelSharedMemory, ACorrectReductionIsUnaffected) {
  const auto out = run<float>([](float* d, cudaStream_t s) { TEST_LAUNCH(2, 64, 0, s, sum_correct)(d); }, 2);
  EXPECT_EQ(out[0], 64.0f);
  EXPECT_EQ(out[1], 64.0f);
}

}  // namespace
