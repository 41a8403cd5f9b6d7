// Thread orders (forward, reverse, shuffle): ptdp-style order_warp_sum/block_sum reductions are right in
// every order, while a planted missing __syncthreads gives a wrong result in forward or reverse
// order; the order setting changes the order in which fibers and blocks run.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernel/executor.h"

namespace {

// The reductions of core/backend/cuda/device_types.cuh.
template <class T> __device__ __forceinline__ T order_warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T> __device__ T block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = order_warp_sum(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  T r = lane < warps ? part[lane] : T(0);
  return order_warp_sum(r);
}

__global__ void sums(long long* block_out, long long* warp_out, const int* x, int64_t n) {
  long long acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc += x[i];
  const long long w = order_warp_sum(acc);
  const long long b = block_sum(acc);
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  warp_out[t] = w;
  block_out[t] = b;
}

class OrderGuard {  // restores the process-wide order after a test
 public:
  OrderGuard() : order_(vgpu::thread_order()), seed_(vgpu::thread_order_seed()) {}
  ~OrderGuard() { vgpu::set_thread_order(order_, seed_); }

 private:
  vgpu::ThreadOrder order_;
  uint64_t seed_;
};

TEST(KernelThreadOrder, ReductionsAreRightInEveryOrder) {
  OrderGuard guard;
  const int blocks = 3, threads = 256;
  const int64_t n = 5000;
  std::vector<int> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<int>((i * 7919) % 1000) - 500;
  for (auto order : {vgpu::ThreadOrder::Forward, vgpu::ThreadOrder::Reverse, vgpu::ThreadOrder::Shuffle}) {
    for (uint64_t seed : {1ull, 2ull, 3ull}) {
      vgpu::set_thread_order(order, seed);
      std::vector<long long> bout(blocks * threads, -1), wout(blocks * threads, -1);
      ASSERT_EQ(vgpu::kernel::run_kernel_sync("sums", blocks, threads, sums, bout.data(), wout.data(), x.data(), n),
                cudaSuccess);
      const int64_t stride = blocks * threads;
      for (int b = 0; b < blocks; ++b) {
        long long block_expect = 0;
        for (int t = 0; t < threads; ++t)
          for (int64_t i = b * threads + t; i < n; i += stride) block_expect += x[i];
        for (int t = 0; t < threads; ++t) {
          long long warp_expect = 0;
          for (int l = t / 32 * 32; l < t / 32 * 32 + 32; ++l)
            for (int64_t i = b * threads + l; i < n; i += stride) warp_expect += x[i];
          ASSERT_EQ(bout[b * threads + t], block_expect) << "order " << int(order) << " block " << b << " thread " << t;
          ASSERT_EQ(wout[b * threads + t], warp_expect) << "order " << int(order) << " block " << b << " thread " << t;
        }
      }
    }
  }
}

// Each thread writes its slot of shared memory and reads its neighbour's. Without the barrier the
// neighbour may not have written yet: in forward order thread t reads slot t+1 before thread t+1
// runs; in reverse order thread 255 reads slot 0 before thread 0 runs.
template <bool kBarrier> __global__ void neighbour(int* out, const int* in) {
  __shared__ int s[256];
  s[threadIdx.x] = in[threadIdx.x];
  if (kBarrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % 256];
}

bool neighbour_right(bool barrier, int round) {
  std::vector<int> in(256), out(256, -1);
  for (int t = 0; t < 256; ++t) in[t] = round * 1000 + t;  // differs from any earlier launch
  const cudaError_t e = barrier
                            ? vgpu::kernel::run_kernel_sync("neighbour<true>", 1, 256, neighbour<true>, out.data(), in.data())
                            : vgpu::kernel::run_kernel_sync("neighbour<false>", 1, 256, neighbour<false>, out.data(), in.data());
  EXPECT_EQ(e, cudaSuccess);
  for (int t = 0; t < 256; ++t)
    if (out[t] != in[(t + 1) % 256]) return false;
  return true;
}

TEST(KernelThreadOrder, MissingBarrierGivesWrongResultsInForwardAndReverseOrder) {
  OrderGuard guard;
  int round = 1;
  vgpu::set_thread_order(vgpu::ThreadOrder::Forward, 1);
  EXPECT_FALSE(neighbour_right(false, round++));
  EXPECT_TRUE(neighbour_right(true, round++));
  vgpu::set_thread_order(vgpu::ThreadOrder::Reverse, 1);
  EXPECT_FALSE(neighbour_right(false, round++));
  EXPECT_TRUE(neighbour_right(true, round++));
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    vgpu::set_thread_order(vgpu::ThreadOrder::Shuffle, seed);
    EXPECT_FALSE(neighbour_right(false, round++)) << "seed " << seed;
    EXPECT_TRUE(neighbour_right(true, round++)) << "seed " << seed;
  }
}

// Records the order in which threads start (first thread of each block) and blocks run.
__global__ void record_start(int* thread_seq, int* block_seq, int* counter) {
  const int k = atomicAdd(counter, 1);
  thread_seq[blockIdx.x * blockDim.x + threadIdx.x] = k;
  if (threadIdx.x == 0) block_seq[blockIdx.x] = k;
}

std::vector<int> ranks(const std::vector<int>& v) {  // position of each element in sorted order
  std::vector<int> idx(v.size()), r(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] < v[b]; });
  for (size_t i = 0; i < idx.size(); ++i) r[idx[i]] = static_cast<int>(i);
  return r;
}

TEST(KernelThreadOrder, OrderSettingChangesStartOrderOfThreadsAndBlocks) {
  OrderGuard guard;
  auto run = [](vgpu::ThreadOrder order, uint64_t seed) {
    vgpu::set_thread_order(order, seed);
    std::vector<int> threads(4 * 64), blocks(4);
    int counter = 0;
    EXPECT_EQ(vgpu::kernel::run_kernel_sync("record_start", 4, 64, record_start, threads.data(), blocks.data(), &counter),
              cudaSuccess);
    return std::make_pair(std::vector<int>(threads.begin(), threads.begin() + 64), ranks(blocks));
  };
  const auto fwd = run(vgpu::ThreadOrder::Forward, 1);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(ranks(fwd.first)[t], t);
  EXPECT_EQ(fwd.second, (std::vector<int>{0, 1, 2, 3}));
  const auto rev = run(vgpu::ThreadOrder::Reverse, 1);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(ranks(rev.first)[t], 63 - t);
  EXPECT_EQ(rev.second, (std::vector<int>{3, 2, 1, 0}));
  const auto shuf = run(vgpu::ThreadOrder::Shuffle, 7);
  EXPECT_NE(ranks(shuf.first), ranks(fwd.first));
  EXPECT_NE(ranks(shuf.first), ranks(rev.first));
  EXPECT_EQ(ranks(run(vgpu::ThreadOrder::Shuffle, 7).first), ranks(shuf.first));  // the seed decides
  EXPECT_NE(ranks(run(vgpu::ThreadOrder::Shuffle, 8).first), ranks(shuf.first));
}

}  // namespace
