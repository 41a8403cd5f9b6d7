// The per-access checks of kernels (access_check.h): planted bugs that a GPU run can expose and
// that only checking each load and store finds. This file's kernels are instrumented like ptdp's
// .cu files (vgpu/CMakeLists.txt, VGPU_ACCESS_FLAGS).
#include <gtest/gtest.h>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>
#include <vgpu/suballoc.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernel/shared_memory.h"
#include "runtime/arena.h"
#include "runtime/test_util.h"

#define ACCESS_LAUNCH(grid, block, stream, ...) \
  ::vgpu::launch(#__VA_ARGS__, __FILE__, __LINE__, grid, block, 0, stream, __VA_ARGS__)

namespace {

using vgpu_test::any_contains;
using vgpu_test::joined;

struct AccessStream {
  cudaStream_t s = nullptr;
  AccessStream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~AccessStream() { cudaStreamDestroy(s); }
};

template <class T> T* upload(const std::vector<T>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T> T* zeros(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0, n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the tests' streams do not wait for the legacy stream
  return static_cast<T*>(p);
}

// Runs launch(stream) with the violations captured; returns them.
template <class F> std::vector<std::string> violations_of(F launch) {
  AccessStream st;
  vgpu::CaptureViolations cap;
  launch(st.s);
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  return cap.messages();
}

// ---- Races between the threads of one launch ----

// Embedding backward with repeated tokens: the rows must be added atomically.
__global__ void scatter_add_plain(const int* tokens, const float* grad, float* table, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) table[tokens[i]] += grad[i];  // planted: not atomicAdd
}
__global__ void scatter_add_atomic(const int* tokens, const float* grad, float* table, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&table[tokens[i]], grad[i]);
}

struct Scatter {
  int* tokens;
  float* grad;
  float* table;
  explicit Scatter(int n) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7) % 5;  // every row several times
    tokens = upload(t);
    grad = upload(std::vector<float>(n, 1.0f));
    table = zeros<float>(5);
  }
  ~Scatter() {
    cudaFree(tokens);
    cudaFree(grad);
    cudaFree(table);
  }
};

TEST(AccessCheck, ScatterAddWithoutAtomicsInOneBlockIsARace) {
  Scatter s(64);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 64, st, scatter_add_plain)(s.tokens, s.grad, s.table, 64); });
  EXPECT_TRUE(any_contains(m, "data race: kernel scatter_add_plain")) << joined(m);
  EXPECT_TRUE(any_contains(m, "hazard on byte offset 0 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "thread (5,0,0) of block (0,0,0)")) << joined(m);
  EXPECT_TRUE(any_contains(m, "thread (0,0,0) of block (0,0,0)")) << joined(m);
  EXPECT_TRUE(any_contains(m, "with no __syncthreads() between them")) << joined(m);
  EXPECT_TRUE(any_contains(m, "access_check_test.cpp:")) << joined(m);  // the line of the access
}

TEST(AccessCheck, ScatterAddWithoutAtomicsAcrossBlocksIsARace) {
  Scatter s(64);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(16, 4, st, scatter_add_plain)(s.tokens, s.grad, s.table, 64); });
  EXPECT_TRUE(any_contains(m, "data race: kernel scatter_add_plain")) << joined(m);
  EXPECT_TRUE(any_contains(m, "in another block of the same launch")) << joined(m);
}

TEST(AccessCheck, ScatterAddWithAtomicsIsClean) {
  Scatter s(64);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(4, 16, st, scatter_add_atomic)(s.tokens, s.grad, s.table, 64); });
  EXPECT_TRUE(m.empty()) << joined(m);
  std::vector<float> got(5);
  ASSERT_EQ(cudaMemcpy(got.data(), s.table, 5 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  float total = 0;
  for (float v : got) total += v;
  EXPECT_EQ(total, 64.0f);
}

// A block sum in shared memory whose first barrier is missing: thread 0 reads partial[32] before
// thread 32 has written it. Wrong on a GPU only when warps are scheduled so; found here in every
// thread order.
template <bool kBarrier> __global__ void block_sum(const float* x, float* out) {
  __shared__ float partial[64];
  partial[threadIdx.x] = x[threadIdx.x];
  if (kBarrier) __syncthreads();  // planted (kBarrier false): missing
  for (unsigned s = 32; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}

TEST(AccessCheck, MissingBarrierInASharedMemoryReductionIsARace) {
  float* x = upload(std::vector<float>(64, 1.0f));
  float* out = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 64, st, block_sum<false>)(x, out); });
  EXPECT_TRUE(any_contains(m, "data race: kernel block_sum<false>")) << joined(m);
  EXPECT_TRUE(any_contains(m, "write-after-read hazard on byte 128 of __shared__ ")) << joined(m);
  EXPECT_TRUE(any_contains(m, "partial")) << joined(m);
  EXPECT_TRUE(any_contains(m, "thread (32,0,0) of block (0,0,0) writes it, and thread (0,0,0) of block (0,0,0) read it"))
      << joined(m);
  const auto clean = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 64, st, block_sum<true>)(x, out); });
  EXPECT_TRUE(clean.empty()) << joined(clean);
  float got = 0;
  ASSERT_EQ(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 64.0f);
  cudaFree(x);
  cudaFree(out);
}

// Warp-synchronous code without __syncwarp: lanes are not in lock step (independent thread
// scheduling, CUDA C++ Programming Guide, SIMT Architecture).
template <bool kSync> __global__ void rotate_in_warp(int* out) {
  __shared__ int lanes[32];
  lanes[threadIdx.x] = threadIdx.x;
  if (kSync) __syncwarp();  // planted (kSync false): missing
  out[threadIdx.x] = lanes[(threadIdx.x + 1) % 32];
}

TEST(AccessCheck, WarpSynchronousCodeWithoutSyncwarpIsARace) {
  int* out = zeros<int>(32);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, rotate_in_warp<false>)(out); });
  EXPECT_TRUE(any_contains(m, "data race: kernel rotate_in_warp<false>")) << joined(m);
  EXPECT_TRUE(any_contains(m, "and no warp synchronisation")) << joined(m);
  const auto clean = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, rotate_in_warp<true>)(out); });
  EXPECT_TRUE(clean.empty()) << joined(clean);
  cudaFree(out);
}

// An atomic and a plain access to one address race too.
__global__ void count_then_read(int* counter, int* seen) {
  if (threadIdx.x == 0) atomicAdd(counter, 1);
  if (threadIdx.x == 1) *seen = *counter;  // planted: plain read of what another thread updates
}

TEST(AccessCheck, PlainReadOfAnAtomicallyUpdatedCounterIsARace) {
  int* counter = zeros<int>(1);
  int* seen = zeros<int>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, count_then_read)(counter, seen); });
  EXPECT_TRUE(any_contains(m, "read-after-write hazard")) << joined(m);
  EXPECT_TRUE(any_contains(m, "wrote (atomically) it")) << joined(m);
  cudaFree(counter);
  cudaFree(seen);
}

// 16-bit values two to a granule: threads 0 and 2 read x[0], thread 1 reads x[1], and thread 3
// writes x[1] with no barrier. Three unordered readers of one granule: the race check must keep
// the reader of the other half (a history of the last two reads alone let thread 2's read of
// x[0] push thread 1's read of x[1] out).
__global__ void halves_read_then_one_written(unsigned short* x, unsigned short* out) {
  const unsigned t = threadIdx.x;
  if (t < 3) out[t] = x[t == 1 ? 1 : 0];
  if (t == 3) x[1] = 7;
}

TEST(AccessCheck, AWriteRacingWithOneOfThreeReadersOfAGranuleIsARace) {
  auto* x = zeros<unsigned short>(2);
  auto* out = zeros<unsigned short>(3);
  const auto m =
      violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, halves_read_then_one_written)(x, out); });
  EXPECT_TRUE(any_contains(m, "race: kernel halves_read_then_one_written")) << joined(m);
  EXPECT_TRUE(any_contains(m, "hazard on byte offset 2 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "thread (1,0,0) of block (0,0,0)")) << joined(m);
  cudaFree(x);
  cudaFree(out);
}

// Reads of one value by every block, then a write by the last block after its own barrier: the
// other blocks' reads are never ordered before it, however many reads of its own block came since.
__global__ void all_read_then_last_block_writes(float* x, float* out) {
  const float v = x[0];
  __syncthreads();
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) x[0] = v + 1;
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

TEST(AccessCheck, AWriteAfterItsOwnBlocksBarrierStillRacesWithOtherBlocksReads) {
  float* x = zeros<float>(1);
  float* out = zeros<float>(4 * 32);
  const auto m =
      violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(4, 32, st, all_read_then_last_block_writes)(x, out); });
  EXPECT_TRUE(any_contains(m, "write-after-read hazard")) << joined(m);
  EXPECT_TRUE(any_contains(m, "in another block of the same launch")) << joined(m);
  cudaFree(x);
  cudaFree(out);
}

// ---- Bounds and initialisation at the real address ----

__global__ void read_at(const float* x, float* y, long long i) {
  if (threadIdx.x == 0) *y = x[i];
}
__global__ void read_at_beside(const float* x, const float* z, float* y, long long i) {
  if (threadIdx.x == 0) *y = x[i] + z[0];
}
__global__ void write_first(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 1.0f;
}

// The violations of read_at reading element i of a 100-float allocation.
std::vector<std::string> read_at_violations(int i) {
  float* x = zeros<float>(100);
  float* y = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at)(x, y, i); });
  cudaFree(x);
  cudaFree(y);
  return m;
}

TEST(AccessCheck, ReadOnePastTheEndIsReported) {
  const auto m = read_at_violations(100);
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel read_at")) << joined(m);
  EXPECT_TRUE(any_contains(m, "accesses 4 byte(s) at 0 byte(s) past the end of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "(400 bytes of device memory on device 0)")) << joined(m);
}

// Past the guard zone, in the rest of the allocation's last page: no allocation's memory at all.
TEST(AccessCheck, ReadBeyondTheGuardZoneIsReported) {
  const auto m = read_at_violations(100 + 128);
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel read_at")) << joined(m);
  EXPECT_TRUE(any_contains(m, "device memory that no allocation holds")) << joined(m);
}

TEST(AccessCheck, ReadIntoTheRoundingPaddingOfACachedBlockIsReported) {
  float* x = zeros<float>(256);
  float* y = zeros<float>(1);
  AccessStream st;
  x = static_cast<float*>(vgpu::sub_allocate(x, 250 * sizeof(float), st.s));
  ACCESS_LAUNCH(1, 32, st.s, write_first)(x, 250);
  vgpu::CaptureViolations cap;
  ACCESS_LAUNCH(1, 32, st.s, read_at)(x, y, 250);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto m = cap.messages();
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel read_at")) << joined(m);
  EXPECT_TRUE(any_contains(m, "0 byte(s) past the end of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "handed out by a caching allocator")) << joined(m);
  vgpu::sub_free(x, st.s);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  cudaFree(x);
  cudaFree(y);
}

TEST(AccessCheck, ReadOfMemoryNothingWroteIsReported) {
  float* x = nullptr;
  ASSERT_EQ(cudaMalloc(&x, 100 * sizeof(float)), cudaSuccess);
  float* y = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at)(x, y, 5); });
  EXPECT_TRUE(any_contains(m, "uninitialized read: kernel read_at")) << joined(m);
  EXPECT_TRUE(any_contains(m, "reads 4 byte(s) at byte offset 20 of allocation #")) << joined(m);
  cudaFree(x);
  cudaFree(y);
}

// What a kernel wrote is initialised, exactly: not the rest of the buffer it was given.
TEST(AccessCheck, OnlyTheBytesAKernelWroteCountAsInitialised) {
  float* x = nullptr;
  ASSERT_EQ(cudaMalloc(&x, 100 * sizeof(float)), cudaSuccess);
  float* y = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) {
    ACCESS_LAUNCH(1, 32, st, write_first)(x, 50);
    ACCESS_LAUNCH(1, 32, st, read_at)(x, y, 49);
    ACCESS_LAUNCH(1, 32, st, read_at)(x, y, 60);  // planted: element 60 was never written
  });
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "reads 4 byte(s) at byte offset 240 of allocation #")) << joined(m);
  cudaFree(x);
  cudaFree(y);
}

// An index that jumps over the guard zone into another live allocation: in bounds of that one,
// so only the launch's pointer arguments tell that the kernel had no business there.
// A pointer into another allocation, with that allocation's tag, that the kernel did not get as an
// argument (one it read from memory, say).
TEST(AccessCheck, AnIndexIntoAnAllocationNoArgumentPointsIntoIsReported) {
  float* x = zeros<float>(100);
  float* y = zeros<float>(1);
  float* z = zeros<float>(1024);  // another tensor, live, written: bounds and initialisation pass
  const ptrdiff_t jump = (reinterpret_cast<char*>(z) - reinterpret_cast<char*>(x)) / ptrdiff_t(sizeof(float));
  ASSERT_EQ(reinterpret_cast<char*>(x + jump), reinterpret_cast<char*>(z));
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at)(x, y, jump + 3); });
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel read_at")) << joined(m);
  EXPECT_TRUE(any_contains(m, "accesses 4 byte(s) at byte offset 12 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "which none of the kernel's 2 pointer argument(s) points into")) << joined(m);
  // The same element read through a pointer argument into z is fine.
  const auto clean = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at)(z, y, 3); });
  EXPECT_TRUE(clean.empty()) << joined(clean);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

// An index that runs from one argument's allocation, over the guard zones, into another
// argument's: every byte it reads is live, written memory the kernel may use, but the pointer
// carries x's tag, not z's (runtime/arena.h).
TEST(AccessCheck, AnIndexFromOneArgumentIntoAnothersAllocationIsReported) {
  float* x = zeros<float>(100);
  float* y = zeros<float>(1);
  float* z = zeros<float>(1024);
  ASSERT_NE(vgpu::rt::tag_of(x), vgpu::rt::tag_of(z));
  const ptrdiff_t jump = (vgpu::rt::untag(z) - vgpu::rt::untag(x)) / ptrdiff_t(sizeof(float));  // in x's view
  const auto m =
      violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at_beside)(x, z, y, jump + 3); });
  ASSERT_EQ(m.size(), 1u) << joined(m);
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel read_at_beside")) << joined(m);
  EXPECT_TRUE(any_contains(m, "accesses 4 byte(s) at byte offset 12 of the memory of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "(4096 bytes of device memory on device 0): it lies in the memory")) << joined(m);
  EXPECT_TRUE(any_contains(m, "but carries another allocation's tag")) << joined(m);
  const auto clean = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at_beside)(z, x, y, 3); });
  EXPECT_TRUE(clean.empty()) << joined(clean);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

// ---- Shared memory bounds and size ----

// A shift by one lane that forgets the last: thread 31 writes a[32]. The red zone after each
// __shared__ variable (device.h) takes the store; without it, it landed in b unseen.
__global__ void shift_into_next_array(float* out) {
  __shared__ float a[32];
  __shared__ float b[32];
  b[threadIdx.x] = 2.0f;
  a[threadIdx.x + 1] = 1.0f;  // planted: a has 32 elements
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

TEST(AccessCheck, AnIndexPastASharedArrayIsReportedNotWrittenIntoTheNext) {
  ASSERT_GT(vgpu::kernel::shared_variables_found(), 0);
  for (const std::string& name : vgpu::unguarded_shared_variables())
    EXPECT_EQ(name.find("shift_into_next_array"), std::string::npos) << name << " has no red zone after it";
  float* out = zeros<float>(32);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, shift_into_next_array)(out); });
  EXPECT_TRUE(any_contains(m, "out of bounds: kernel shift_into_next_array")) << joined(m);
  EXPECT_TRUE(any_contains(m, "0 byte(s) past the end of __shared__ (anonymous namespace)::shift_into_next_array(float*)::a")) << joined(m);
  cudaFree(out);
}


__global__ void too_much_shared(float* out) {
  __shared__ float big[13 * 1024];  // 52 KiB: more than a block may declare statically
  big[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) *out = big[1];
}

TEST(AccessCheck, SharedMemoryBeyond48KiBIsReported) {
  float* out = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, too_much_shared)(out); });
  EXPECT_TRUE(any_contains(m, "shared memory: kernel too_much_shared")) << joined(m);
  EXPECT_TRUE(any_contains(m, "uses 53248 bytes of shared memory per block")) << joined(m);
  cudaFree(out);
}

// ---- The host touching device memory ----

TEST(AccessCheck, TheHostReadingDeviceMemoryIsReported) {
  float* x = zeros<float>(4);
  vgpu::CaptureViolations cap;
  const volatile float* p = x;
  const float v = p[2];  // planted: a device pointer dereferenced on the host
  const auto m = cap.messages();
  EXPECT_EQ(v, 0.0f);
  EXPECT_TRUE(any_contains(m, "host access to device memory: the host reads 4 byte(s) at byte offset 8 of allocation #"))
      << joined(m);
  EXPECT_TRUE(any_contains(m, "access_check_test.cpp:")) << joined(m);
  cudaFree(x);
}

TEST(AccessCheck, TheHostUsingPinnedMemoryIsClean) {
  void* h = nullptr;
  ASSERT_EQ(cudaMallocHost(&h, 16), cudaSuccess);
  vgpu::CaptureViolations cap;
  volatile float* p = static_cast<float*>(h);
  p[1] = 3.0f;
  EXPECT_EQ(p[1], 3.0f);
  EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  cudaFreeHost(h);
}

// Four floats of device memory (zeros) and of pinned memory, which the host reads and writes
// through p (volatile: each access is a load or store the instrumentation sees).
struct PinnedPair {
  float* x = zeros<float>(4);
  void* h = nullptr;
  volatile float* p = nullptr;
  PinnedPair() {
    EXPECT_EQ(cudaMallocHost(&h, 4 * sizeof(float)), cudaSuccess);
    p = static_cast<float*>(h);
  }
  ~PinnedPair() {
    cudaFreeHost(h);
    cudaFree(x);
  }
};

// The host reading a pinned buffer that a copy on a stream fills, before it synchronised with the
// stream: on a GPU the copy may not have run, and the host reads the old contents.
TEST(AccessCheck, TheHostReadingPinnedMemoryBeforeTheCopyIntoItFinishedIsARace) {
  PinnedPair b;
  float* x = b.x;
  void* h = b.h;
  volatile float* p = b.p;
  AccessStream st;
  std::vector<std::string> m;
  {
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpyAsync(h, x, 4 * sizeof(float), cudaMemcpyDeviceToHost, st.s), cudaSuccess);
    const float v = p[1];  // planted: no cudaStreamSynchronize before the read
    (void)v;
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    m = cap.messages();
  }
  EXPECT_TRUE(any_contains(m, "race: the host reads 4 byte(s) at byte offset 4 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "pinned host memory")) << joined(m);
  EXPECT_TRUE(any_contains(m, "which cudaMemcpyAsync on stream #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "access_check_test.cpp:")) << joined(m);
  {  // synchronised first: clean
    vgpu::CaptureViolations cap;
    ASSERT_EQ(cudaMemcpyAsync(h, x, 4 * sizeof(float), cudaMemcpyDeviceToHost, st.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    EXPECT_EQ(p[1], 0.0f);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  }
}

// The host refilling a pinned staging buffer while the copy out of it may still be reading it.
TEST(AccessCheck, TheHostOverwritingPinnedMemoryACopyStillReadsIsARace) {
  PinnedPair b;
  float* x = b.x;
  void* h = b.h;
  volatile float* p = b.p;
  for (int i = 0; i < 4; ++i) p[i] = 1.0f;
  AccessStream st;
  vgpu::CaptureViolations cap;
  ASSERT_EQ(cudaMemcpyAsync(x, h, 4 * sizeof(float), cudaMemcpyHostToDevice, st.s), cudaSuccess);
  p[0] = 2.0f;  // planted: the next batch written before the copy of this one finished
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto m = cap.messages();
  EXPECT_TRUE(any_contains(m, "race: the host writes 4 byte(s) at byte offset 0 of allocation #")) << joined(m);
  EXPECT_TRUE(any_contains(m, "overwrites a buffer a copy still reads")) << joined(m);
}

// ---- What a kernel stored, for the race checker across streams ----

// The race checker learns an instrumented kernel's writes from its stores (kernel::AccessLog), so
// a store of the value already there counts (a snapshot comparison would not see it), from every
// launch of the site, checks on or off.
__global__ void store_ones(float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = 1.0f;
}

TEST(AccessCheck, AStoreOfTheValueAlreadyThereRacesWithAnotherStreamsRead) {
  for (bool checks : {true, false}) {
    vgpu::set_access_checks(checks);
    float* x = upload(std::vector<float>(1000, 1.0f));
    float* y = zeros<float>(1000);
    AccessStream a, b;
    vgpu::CaptureViolations cap;
    for (int launch = 0; launch < 2; ++launch) {  // the second launch of the site takes no snapshot
      ACCESS_LAUNCH(2, 64, a.s, store_ones)(x, 1000);
      // Bytes [2000, 4000) only: past the kernel argument's first byte.
      ASSERT_EQ(cudaMemcpyAsync(y, x + 500, 500 * sizeof(float), cudaMemcpyDeviceToDevice, b.s), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    const auto m = cap.messages();
    EXPECT_TRUE(any_contains(m, "race: ")) << "checks " << checks << ": " << joined(m);
    EXPECT_TRUE(any_contains(m, "kernel store_ones")) << "checks " << checks << ": " << joined(m);
    EXPECT_EQ(m.size(), 2u) << "checks " << checks << ": " << joined(m);  // one per launch
    cudaFree(x);
    cudaFree(y);
  }
  vgpu::set_access_checks(true);
}

// Its loads of device memory likewise (the kernel's argument points at x[0]; the reads that race
// are past it): a kernel reading a buffer that another stream refills meanwhile (the next
// micro-batch's copy into an input buffer, queued without an event after the kernel), in both
// orders of queuing, and a read whose other stream's write was ordered by an event is clean.
__global__ void sum_tail(const float* x, float* out, int from, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float s = 0;
    for (int i = from; i < n; ++i) s += x[i];
    *out = s;
  }
}

TEST(AccessCheck, AKernelsReadPastItsArgumentsFirstByteRacesWithAnotherStreamsWrite) {
  float* x = upload(std::vector<float>(1000, 1.0f));
  float* out = zeros<float>(1);
  std::vector<float> h(100, 2.0f);
  for (bool kernel_first : {true, false}) {
    SCOPED_TRACE(kernel_first ? "kernel queued first" : "copy queued first");
    AccessStream a, b;
    vgpu::CaptureViolations cap;
    auto copy = [&] {  // bytes [3600, 4000) only
      ASSERT_EQ(cudaMemcpyAsync(x + 900, h.data(), 100 * sizeof(float), cudaMemcpyHostToDevice, b.s), cudaSuccess);
    };
    if (!kernel_first) copy();
    ACCESS_LAUNCH(1, 32, a.s, sum_tail)(x, out, 500, 1000);
    if (kernel_first) copy();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto m = cap.messages();
    ASSERT_EQ(m.size(), 1u) << joined(m);
    // Which of the two is reported second depends on whether the kernel ran before the copy was
    // queued; both name the kernel's reads and the copy's writes.
    EXPECT_TRUE(any_contains(m, "race: ")) << joined(m);
    EXPECT_TRUE(any_contains(m, "kernel sum_tail")) << joined(m);
    EXPECT_TRUE(any_contains(m, "read") && any_contains(m, "bytes [2000, 4000)")) << joined(m);
    EXPECT_TRUE(any_contains(m, "cudaMemcpyAsync") && any_contains(m, "bytes [3600, 4000)")) << joined(m);
  }
  {  // ordered by an event: no race
    AccessStream a, b;
    cudaEvent_t done;
    ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
    vgpu::CaptureViolations cap;
    ACCESS_LAUNCH(1, 32, a.s, sum_tail)(x, out, 500, 1000);
    ASSERT_EQ(cudaEventRecord(done, a.s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b.s, done, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(x + 900, h.data(), 100 * sizeof(float), cudaMemcpyHostToDevice, b.s), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
    cudaEventDestroy(done);
  }
  cudaFree(x);
  cudaFree(out);
}

// ---- VGPU_ACCESS_CHECK=once: each distinct launch checked once ----

__global__ void scaled_read_at(const float* x, float* y, float s, long long i) {
  if (threadIdx.x == 0) *y = s * x[i];
}

__global__ void shift_left(const float* a, float* b, int n) {  // races with itself when a == b
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 1 < n) b[i] = a[i + 1];
}

// A training run repeats its first step's launches on buffers at other addresses: those repeats
// are not checked again, but a launch that differs in what the checks depend on is: a scalar
// argument, the size of an argument's allocation, an argument's offset, or two arguments in one
// allocation; not a floating-point argument (a learning rate or a bias correction, which change
// every step). An unchecked launch's output still counts as written.
TEST(AccessCheck, OnceChecksEachDistinctLaunchOnce) {
  vgpu::set_access_checks(vgpu::AccessChecks::Once);
  std::vector<float*> held;  // every buffer stays allocated: each launch is on new addresses
  auto read = [&held](size_t elems, long long i, int offset = 0) {
    float* x = zeros<float>(elems);
    float* y = zeros<float>(1);
    held.insert(held.end(), {x, y});
    return violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at)(x + offset, y, i); });
  };
  EXPECT_TRUE(any_contains(read(100, 100), "out of bounds: kernel read_at"));
  EXPECT_TRUE(read(100, 100).empty()) << "the same launch on other buffers is not checked again";
  EXPECT_TRUE(any_contains(read(100, 101), "out of bounds: kernel read_at")) << "another index";
  EXPECT_TRUE(read(100, 99).empty());
  EXPECT_TRUE(any_contains(read(100, 99, 1), "out of bounds: kernel read_at")) << "another offset";
  EXPECT_TRUE(any_contains(read(90, 100), "out of bounds: kernel read_at")) << "another allocation size";
  auto scaled = [&held](float s) {
    float* x = zeros<float>(100);
    float* y = zeros<float>(1);
    held.insert(held.end(), {x, y});
    return violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, scaled_read_at)(x, y, s, 100); });
  };
  EXPECT_TRUE(any_contains(scaled(0.5f), "out of bounds: kernel scaled_read_at"));
  EXPECT_TRUE(scaled(0.25f).empty()) << "another floating-point argument is the same launch";
  for (float* p : held) cudaFree(p);

  float* a = upload(std::vector<float>(256, 1.0f));
  float* b = zeros<float>(256);
  auto shift = [](const float* from, float* to) {
    return violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(2, 128, st, shift_left)(from, to, 255); });
  };
  EXPECT_TRUE(shift(a + 1, b).empty());
  const auto in_place = shift(a + 1, a);  // offsets and sizes as before, but one allocation
  EXPECT_TRUE(any_contains(in_place, "race: ")) << "one allocation is another launch: " << joined(in_place);

  float* c = nullptr;
  ASSERT_EQ(cudaMalloc(&c, 256 * sizeof(float)), cudaSuccess);
  const auto unchecked = shift(b + 1, c);  // as shift(a + 1, b): not checked; c still counts as written
  EXPECT_TRUE(unchecked.empty()) << joined(unchecked);
  float* y = zeros<float>(1);
  const auto m = violations_of([&](cudaStream_t st) { ACCESS_LAUNCH(1, 32, st, read_at_beside)(c, c, y, 253); });
  EXPECT_TRUE(m.empty()) << joined(m);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(y);
  vgpu::set_access_checks(true);
}

// ---- Correct kernels stay quiet ----

__global__ void scale_grid_stride(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = 2.0f * x[i];
}

TEST(AccessCheck, AGridStrideLoopIsCleanAndItsOutputInitialised) {
  float* x = upload(std::vector<float>(1000, 1.5f));
  float* y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, 1000 * sizeof(float)), cudaSuccess);
  float* z = nullptr;
  ASSERT_EQ(cudaMalloc(&z, 1000 * sizeof(float)), cudaSuccess);
  const auto m = violations_of([&](cudaStream_t st) {
    ACCESS_LAUNCH(3, 64, st, scale_grid_stride)(x, y, 1000);
    ACCESS_LAUNCH(3, 64, st, scale_grid_stride)(y, z, 1000);
  });
  EXPECT_TRUE(m.empty()) << joined(m);
  std::vector<float> got(1000);
  ASSERT_EQ(cudaMemcpy(got.data(), z, 1000 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[999], 6.0f);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

}  // namespace
