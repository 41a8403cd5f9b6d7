// Built-in variables and shared memory of the executor: every thread sees its own threadIdx and
// its block's blockIdx/blockDim/gridDim, a grid-stride loop covers every element exactly once, and
// __shared__ is one copy per block.
#include <gtest/gtest.h>

#include <vector>

#include "kernel/executor.h"

namespace {

struct Seen {
  unsigned t[3], b[3], bd[3], gd[3];
};

__global__ void record_builtins(Seen* out) {
  const unsigned tpb = blockDim.x * blockDim.y * blockDim.z;
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  Seen& s = out[block * tpb + thread];
  s = Seen{{threadIdx.x, threadIdx.y, threadIdx.z},
           {blockIdx.x, blockIdx.y, blockIdx.z},
           {blockDim.x, blockDim.y, blockDim.z},
           {gridDim.x, gridDim.y, gridDim.z}};
}

TEST(KernelBuiltins, EveryThreadSeesItsOwnIndices) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const unsigned tpb = 24, blocks = 12;
  std::vector<Seen> seen(tpb * blocks, Seen{{99, 99, 99}, {99, 99, 99}, {0, 0, 0}, {0, 0, 0}});
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("record_builtins", grid, block, record_builtins, seen.data()), cudaSuccess);
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx) {
              const unsigned b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
              const Seen& s = seen[b * tpb + t];
              ASSERT_EQ(s.t[0], tx);
              ASSERT_EQ(s.t[1], ty);
              ASSERT_EQ(s.t[2], tz);
              ASSERT_EQ(s.b[0], bx);
              ASSERT_EQ(s.b[1], by);
              ASSERT_EQ(s.b[2], bz);
              ASSERT_EQ(s.bd[0], 4u);
              ASSERT_EQ(s.bd[1], 3u);
              ASSERT_EQ(s.bd[2], 2u);
              ASSERT_EQ(s.gd[0], 3u);
              ASSERT_EQ(s.gd[1], 2u);
              ASSERT_EQ(s.gd[2], 2u);
            }
}

__global__ void grid_stride_increment(int* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += 1;
}

TEST(KernelBuiltins, GridStrideLoopCoversEveryElementOnce) {
  const int64_t n = 100003;  // not a multiple of anything below
  std::vector<int> x(n + 1, 0);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("grid_stride_increment", 7, 256, grid_stride_increment, x.data(), n),
            cudaSuccess);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], 1) << "element " << i;
  EXPECT_EQ(x[n], 0);
}

// Each block fills its __shared__ array, then (after a barrier) reads it back: blocks must not see
// each other's values (they run one after another on the same thread here).
__global__ void shared_per_block(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
  __syncthreads();
  int sum = 0;
  for (int i = 0; i < 64; ++i) sum += s[i];
  out[blockIdx.x * 64 + threadIdx.x] = sum;
}

TEST(KernelBuiltins, SharedMemoryIsPerBlock) {
  std::vector<int> out(5 * 64, -1);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("shared_per_block", 5, 64, shared_per_block, out.data()), cudaSuccess);
  for (int b = 0; b < 5; ++b)
    for (int t = 0; t < 64; ++t) ASSERT_EQ(out[b * 64 + t], b * 64000 + 63 * 64 / 2);
}

// Parameters are per-thread copies, as in CUDA: one thread changing its copy changes no other's.
__global__ void modify_parameter(int* out, int v) {
  v += static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = v;
}

TEST(KernelBuiltins, ParametersArePerThreadCopies) {
  std::vector<int> out(64, -1);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("modify_parameter", 1, 64, modify_parameter, out.data(), 100), cudaSuccess);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], 100 + t);
}

}  // namespace
