// Warp shuffles, votes and counting barriers follow the CUDA C++ Programming Guide's semantics
// (source lanes within `width` groups, no wrap for up/down, xor reading only earlier groups).
#include <gtest/gtest.h>

#include <vector>

#include "kernel/executor.h"

namespace {

__global__ void shuffles(int* out, int width) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int v = 100 + lane;
  int* o = out + threadIdx.x * 4;
  o[0] = __shfl_sync(0xffffffffu, v, 3, width);
  o[1] = __shfl_up_sync(0xffffffffu, v, 2, width);
  o[2] = __shfl_down_sync(0xffffffffu, v, 2, width);
  o[3] = __shfl_xor_sync(0xffffffffu, v, 5, width);
}

TEST(KernelWarpOps, ShufflesFollowTheGuide) {
  for (int width : {32, 16, 8, 4}) {
    std::vector<int> out(64 * 4, -1);
    ASSERT_EQ(vgpu::kernel::run_kernel_sync("shuffles", 1, 64, shuffles, out.data(), width), cudaSuccess);
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, base = lane & ~(width - 1);
      const int idx = base + (3 % width);
      const int up = lane - 2 >= base ? lane - 2 : lane;
      const int down = lane + 2 < base + width ? lane + 2 : lane;
      const int x = lane ^ 5;
      const int xr = x < base + width ? x : lane;
      EXPECT_EQ(out[t * 4 + 0], 100 + idx) << "width " << width << " lane " << lane;
      EXPECT_EQ(out[t * 4 + 1], 100 + up) << "width " << width << " lane " << lane;
      EXPECT_EQ(out[t * 4 + 2], 100 + down) << "width " << width << " lane " << lane;
      EXPECT_EQ(out[t * 4 + 3], 100 + xr) << "width " << width << " lane " << lane;
    }
  }
}

__global__ void shuffle_types(double* d, long long* ll, float* f, unsigned* u) {
  const unsigned lane = threadIdx.x;
  d[lane] = __shfl_xor_sync(0xffffffffu, 0.5 + lane, 1);
  ll[lane] = __shfl_down_sync(0xffffffffu, (1LL << 40) + lane, 1);
  f[lane] = __shfl_sync(0xffffffffu, 1.25f * lane, 31);
  u[lane] = __shfl_up_sync(0xffffffffu, 7u * lane, 1);
}

TEST(KernelWarpOps, ShufflesMoveEveryScalarType) {
  std::vector<double> d(32);
  std::vector<long long> ll(32);
  std::vector<float> f(32);
  std::vector<unsigned> u(32);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("shuffle_types", 1, 32, shuffle_types, d.data(), ll.data(), f.data(),
                                          u.data()),
            cudaSuccess);
  for (unsigned l = 0; l < 32; ++l) {
    EXPECT_EQ(d[l], 0.5 + (l ^ 1u));
    EXPECT_EQ(ll[l], (1LL << 40) + (l < 31 ? l + 1 : l));
    EXPECT_EQ(f[l], 1.25f * 31);
    EXPECT_EQ(u[l], 7u * (l > 0 ? l - 1 : l));
  }
}

__global__ void votes(unsigned* ballot, int* any, int* all, int* count, int* band, int* bor) {
  const unsigned t = threadIdx.x;
  ballot[t] = __ballot_sync(0xffffffffu, t % 3 == 0);
  any[t] = __any_sync(0xffffffffu, t == 40);
  all[t] = __all_sync(0xffffffffu, t < 1000);
  count[t] = __syncthreads_count(t % 2 == 0);
  band[t] = __syncthreads_and(t != 7);
  bor[t] = __syncthreads_or(t == 7);
}

TEST(KernelWarpOps, VotesAndCountingBarriers) {
  std::vector<unsigned> ballot(64);
  std::vector<int> any(64), all(64), count(64), band(64), bor(64);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("votes", 1, 64, votes, ballot.data(), any.data(), all.data(), count.data(),
                                          band.data(), bor.data()),
            cudaSuccess);
  for (unsigned t = 0; t < 64; ++t) {
    unsigned expect = 0;
    for (unsigned l = 0; l < 32; ++l)
      if ((t / 32 * 32 + l) % 3 == 0) expect |= 1u << l;
    EXPECT_EQ(ballot[t], expect) << t;
    EXPECT_EQ(any[t], t >= 32 ? 1 : 0) << t;
    EXPECT_EQ(all[t], 1);
    EXPECT_EQ(count[t], 32);
    EXPECT_EQ(band[t], 0);
    EXPECT_EQ(bor[t], 1);
  }
}

// Half-warp groups that shuffle with their own masks complete independently.
__global__ void half_warp_groups(int* out) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  out[threadIdx.x] = __shfl_xor_sync(mask, static_cast<int>(lane), 1);
  __syncwarp(mask);
}

TEST(KernelWarpOps, PartialMasksFormIndependentGroups) {
  std::vector<int> out(32, -1);
  ASSERT_EQ(vgpu::kernel::run_kernel_sync("half_warp_groups", 1, 32, half_warp_groups, out.data()), cudaSuccess);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(out[l], l ^ 1);
}

}  // namespace
