// Launches through the stream (vgpu::launch, as PTDP_LAUNCH expands): arguments converted and
// copied at the launch, configuration limits, pointer arguments checked and recorded for the race
// checker and the guard zones, written memory marked initialised, atomics, sticky failures.
#include <gtest/gtest.h>
#include <vgpu/launch.h>
#include <vgpu/runtime.h>
#include <vgpu/suballoc.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel/executor.h"
#include "runtime/test_util.h"

// What ptdp's launch.cuh defines under PTDP_VGPU.
#define TEST_LAUNCH(grid, block, shmem, stream, ...) \
  ::vgpu::launch(#__VA_ARGS__, __FILE__, __LINE__, grid, block, shmem, stream, __VA_ARGS__)

namespace {

using vgpu_test::joined;


// Holds a stream's worker until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  static void wait(void* p) {
    auto* g = static_cast<Gate*>(p);
    std::unique_lock<std::mutex> lock(g->mu);
    g->cv.wait(lock, [g] { return g->open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

template <class T> T* device_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

// Runs `scenario` in a child process (a sticky error corrupts the device for good, as on a GPU, so
// it must not outlive the test); it prints what went wrong and returns whether all was as expected.
template <class F> void in_child_process(F scenario) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_EXIT(
      {
        const bool ok = scenario();
        std::fflush(stderr);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
#define CHILD_CHECK(cond)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return false;                                                          \
    }                                                                        \
  } while (0)

__global__ void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += a * x[i];
}

TEST(KernelLaunch, RunsInStreamOrderAndResultsAreVisibleAfterSynchronisation) {
  Stream st;
  const int64_t n = 5000;
  float* x = device_alloc<float>(n);
  float* y = device_alloc<float>(n);
  std::vector<float> hx(n), hy(n);
  for (int64_t i = 0; i < n; ++i) {
    hx[i] = float(i);
    hy[i] = 1.0f;
  }
  ASSERT_EQ(cudaMemcpyAsync(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice, st.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice, st.s), cudaSuccess);
  TEST_LAUNCH(4, 256, 0, st.s, axpy)(y, x, 2.0f, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  TEST_LAUNCH(4, 256, 0, st.s, axpy)(y, x, 1.0f, n);
  ASSERT_EQ(cudaMemcpyAsync(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hy[i], 1.0f + 3.0f * float(i)) << i;
  cudaFree(x);
  cudaFree(y);
}

struct Params {
  int a;
  double b;
};
__global__ void store_params(double* out, Params p, int k, long long big) {
  if (threadIdx.x == 0) {
    out[0] = p.a;
    out[1] = p.b;
    out[2] = k;
    out[3] = double(big);
  }
}

TEST(KernelLaunch, ArgumentsAreConvertedAndCopiedAtTheLaunch) {
  Stream st;
  double* out = device_alloc<double>(4);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(st.s, &Gate::wait, &gate), cudaSuccess);
  Params p{7, 2.5};
  int64_t k = 41;     // converts to the int parameter
  short big = 12345;  // converts to long long
  TEST_LAUNCH(1, 32, 0, st.s, store_params)(out, p, k, big);
  p.a = -1;  // the kernel has not run yet: it must see the values at the launch
  p.b = -1;
  k = -1;
  big = -1;
  gate.release();
  double h[4];
  ASSERT_EQ(cudaMemcpyAsync(h, out, sizeof h, cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(h[0], 7);
  EXPECT_EQ(h[1], 2.5);
  EXPECT_EQ(h[2], 41);
  EXPECT_EQ(h[3], 12345);
  cudaFree(out);
}

__global__ void set_one(int* flag) { *flag = 1; }

TEST(KernelLaunch, InvalidConfigurationsFailAtTheLaunchAndQueueNothing) {
  Stream st;
  int* flag = device_alloc<int>(1);
  ASSERT_EQ(cudaMemsetAsync(flag, 0, sizeof(int), st.s), cudaSuccess);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  struct Config {
    dim3 grid, block;
    size_t shmem;
  };
  const Config bad[] = {
      {dim3(1), dim3(1025), 0},          {dim3(1), dim3(32, 33), 0},  {dim3(1), dim3(1, 1, 65), 0},
      {dim3(1), dim3(0), 0},             {dim3(0), dim3(32), 0},      {dim3(1, 65536), dim3(32), 0},
      {dim3(1, 1, 65536), dim3(32), 0},  {dim3(2147483648u), dim3(32), 0},
      {dim3(1), dim3(32), 48 * 1024 + 1}, {dim3(1), dim3(2048), 0},
  };
  for (const Config& c : bad) {
    TEST_LAUNCH(c.grid, c.block, c.shmem, st.s, set_one)(flag);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration)
        << "grid (" << c.grid.x << "," << c.grid.y << "," << c.grid.z << ") block (" << c.block.x << ","
        << c.block.y << "," << c.block.z << ") shmem " << c.shmem;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
  }
  // The limits themselves are fine.
  TEST_LAUNCH(dim3(1), dim3(1024), 48 * 1024, st.s, set_one)(flag);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  TEST_LAUNCH(dim3(1), dim3(1, 1, 64), 0, st.s, set_one)(flag);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  TEST_LAUNCH(dim3(1, 65535, 1), dim3(1), 0, st.s, set_one)(flag);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int h = -1;
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&h, flag, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 1);
  cudaFree(flag);
}

__global__ void write_one_past(float* x, int64_t n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) x[n] = 1.0f;  // planted: one element past the end
}

TEST(KernelLaunch, WriteOnePastTheEndIsReported) {
  Stream st;
  const int64_t n = 100;
  float* x = device_alloc<float>(n);
  vgpu::CaptureViolations cap;
  TEST_LAUNCH(1, 32, 0, st.s, write_one_past)(x, n);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto m = cap.messages();
  EXPECT_TRUE(vgpu_test::any_contains(m, "out of bounds: memory past the end of")) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "bytes 0 to 3 after its last byte changed")) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "kernel write_one_past")) << joined(m);
  cudaFree(x);
}

// A tensor of 250 floats in a cached block of 256 (vgpu/suballoc.h): one element past the
// tensor lands in the block's padding, and is reported as past the end of the tensor.
TEST(KernelLaunch, WriteIntoTheRoundingPaddingOfACachedBlockIsReported) {
  Stream st;
  float* x = device_alloc<float>(256);
  x = static_cast<float*>(vgpu::sub_allocate(x, 250 * sizeof(float), st.s));
  vgpu::CaptureViolations cap;
  TEST_LAUNCH(1, 32, 0, st.s, write_one_past)(x, 250);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto m = cap.messages();
  EXPECT_TRUE(vgpu_test::any_contains(m, "out of bounds: memory past the end of allocation #")) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "(1000 bytes of device memory on device 0, handed out by a caching allocator from cudaMalloc "
                     "block #")) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "bytes 0 to 3 after its last byte changed")) << joined(m);
  EXPECT_TRUE(vgpu_test::any_contains(m, "kernel write_one_past")) << joined(m);
  vgpu::sub_free(x, st.s);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  cudaFree(x);
}

__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }

TEST(KernelLaunch, HostAndFreedPointerArgumentsAreReportedAndTheKernelDoesNotRun) {
  in_child_process([] {
    Stream st;
    std::vector<float> host(32, 0.0f);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 32, 0, st.s, add_one)(host.data());
    const cudaError_t e = cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(vgpu_test::any_contains(m, "invalid kernel argument: kernel add_one (launched at "));
    CHILD_CHECK(vgpu_test::any_contains(m, "argument #1 is not device memory (a host pointer, or freed)"));
    CHILD_CHECK(e == cudaErrorLaunchFailure);
    CHILD_CHECK(host[0] == 0.0f);  // the kernel did not run
    void* p = nullptr;
    CHILD_CHECK(cudaMalloc(&p, 4) == cudaErrorLaunchFailure);  // sticky
    return true;
  });
  in_child_process([] {
    Stream st;
    float* x = device_alloc<float>(32);
    cudaFree(x);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 32, 0, st.s, add_one)(x);
    cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(vgpu_test::any_contains(m, "argument #1 is not device memory (a host pointer, or freed)"));
    return true;
  });
  in_child_process([] {  // a tensor freed to its caching allocator (vgpu/suballoc.h)
    Stream st;
    float* x = device_alloc<float>(32);
    x = static_cast<float*>(vgpu::sub_allocate(x, 32 * sizeof(float), st.s));
    vgpu::sub_free(x, st.s);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 32, 0, st.s, add_one)(x);
    cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(vgpu_test::any_contains(m, "use after free: kernel add_one (launched at "));
    CHILD_CHECK(vgpu_test::any_contains(m, "It points at offset 0 of allocation #"));
    CHILD_CHECK(vgpu_test::any_contains(m, "freed by: tensor free (caching allocator)"));
    return true;
  });
}

__global__ void count_between(int* out, const float* begin, const float* end) {
  if (threadIdx.x == 0) *out = static_cast<int>(end - begin);
}

TEST(KernelLaunch, AnEndPointerArgumentIsAccepted) {
  Stream st;
  float* x = device_alloc<float>(16);
  int* out = device_alloc<int>(1);
  vgpu::CaptureViolations cap;
  TEST_LAUNCH(1, 32, 0, st.s, count_between)(out, x, x + 16);  // one past the end: not dereferenced
  int h = 0;
  ASSERT_EQ(cudaMemcpyAsync(&h, out, sizeof h, cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(h, 16);
  EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  cudaFree(x);
  cudaFree(out);
}

template <class T> struct ColumnValue {  // like column_sum.cu's functor
  const T* x;
  int64_t cols;
  __device__ float operator()(int64_t i) const { return float(x[i]); }
};
template <class F> __global__ void apply_functor(float* out, F f, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = f(i);
}

TEST(KernelLaunch, PointerFieldsOfAggregateArgumentsAreCheckedToo) {
  static_assert(vgpu::detail::field_count<ColumnValue<float>>() == 2);
  static_assert(vgpu::detail::field_count<Params>() == 2);
  in_child_process([] {
    Stream st;
    float* out = device_alloc<float>(8);
    std::vector<float> host(8, 1.0f);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 32, 0, st.s, apply_functor<ColumnValue<float>>)(out, ColumnValue<float>{host.data(), 8}, 8);
    cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(vgpu_test::any_contains(m, "argument #2 (field #1) is not device memory"));
    return true;
  });
}

__global__ void fill_value(float* x, float v, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = v;
}

// The ranges of a launch reach the race checker: a kernel reading what a kernel on another
// stream writes, with nothing ordering them, is a race; an event between them orders them.
__global__ void copy_kernel(float* dst, const float* src, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

TEST(KernelLaunch, KernelsOnTwoStreamsRaceUnlessAnEventOrdersThem) {
  Stream a, b;
  const int64_t n = 256;
  float* x = device_alloc<float>(n);
  float* y = device_alloc<float>(n);
  ASSERT_EQ(cudaMemset(x, 0, n * sizeof(float)), cudaSuccess);
  {
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 64, 0, a.s, fill_value)(x, 1.0f, n);  // writes x
    TEST_LAUNCH(1, 64, 0, b.s, copy_kernel)(y, x, n);              // reads x
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto m = cap.messages();
    EXPECT_TRUE(vgpu_test::any_contains(m, "race: ")) << joined(m);
    EXPECT_TRUE(vgpu_test::any_contains(m, "kernel copy_kernel")) << joined(m);
    EXPECT_TRUE(vgpu_test::any_contains(m, "kernel fill_value")) << joined(m);
  }
  {
    cudaEvent_t e;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 64, 0, a.s, fill_value)(x, 2.0f, n);
    ASSERT_EQ(cudaEventRecord(e, a.s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess);
    TEST_LAUNCH(1, 64, 0, b.s, copy_kernel)(y, x, n);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
    cudaEventDestroy(e);
  }
  cudaFree(x);
  cudaFree(y);
}

// A launch knows where each pointer argument starts, not how far the kernel goes: what it wrote
// is learnt when it runs (the bytes that changed) and checked then, against accesses recorded
// before it ran as well as after.
__global__ void fill_range(float* x, float v, int64_t from, int64_t to) {
  for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) x[i] = v;
}
std::atomic<bool> g_kernel_wrote{false}, g_kernel_may_end{false};
__global__ void fill_range_then_wait(float* x, float v, int64_t from, int64_t to) {
  for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) x[i] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    g_kernel_wrote = true;
    while (!g_kernel_may_end.load()) std::this_thread::yield();
  }
}
void set_flag(void* p) { static_cast<std::atomic<bool>*>(p)->store(true); }

TEST(KernelLaunch, WritesPastAPointersFirstByteAreCheckedForRaces) {
  Stream a, b;
  const int64_t n = 1024;
  const size_t half = n / 2 * sizeof(float);
  float* x = device_alloc<float>(n);
  float* y = device_alloc<float>(n);
  ASSERT_EQ(cudaMemset(x, 0, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // cudaMemset is asynchronous on the legacy stream
  auto expect_race = [](const std::vector<std::string>& m) {
    EXPECT_TRUE(vgpu_test::any_contains(m, "race: ")) << joined(m);
    EXPECT_TRUE(vgpu_test::any_contains(m, "kernel fill_range")) << joined(m);
    EXPECT_TRUE(vgpu_test::any_contains(m, "cudaMemcpyAsync")) << joined(m);
  };
  {  // the kernel (writing the tail through a pointer to the head) has run when b reads the tail
    vgpu::CaptureViolations cap;
    std::atomic<bool> ran{false};
    TEST_LAUNCH(1, 64, 0, a.s, fill_range)(x, 1.0f, n / 2, n);
    ASSERT_EQ(cudaLaunchHostFunc(a.s, set_flag, &ran), cudaSuccess);
    while (!ran.load()) std::this_thread::yield();  // nothing the race checker sees as ordering
    ASSERT_EQ(cudaMemcpyAsync(y, x + n / 2, half, cudaMemcpyDeviceToDevice, b.s), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_race(cap.messages());
  }
  {  // b's read of the tail is queued and recorded before the kernel runs
    vgpu::CaptureViolations cap;
    Gate g;
    ASSERT_EQ(cudaLaunchHostFunc(a.s, Gate::wait, &g), cudaSuccess);
    TEST_LAUNCH(1, 64, 0, a.s, fill_range)(x, 2.0f, n / 2, n);
    ASSERT_EQ(cudaMemcpyAsync(y, x + n / 2, half, cudaMemcpyDeviceToDevice, b.s), cudaSuccess);
    g.release();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_race(cap.messages());
  }
  {  // the same, ordered by an event: learnt after b's read was recorded, and still no race
    cudaEvent_t e;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    vgpu::CaptureViolations cap;
    Gate g;
    ASSERT_EQ(cudaLaunchHostFunc(a.s, Gate::wait, &g), cudaSuccess);
    TEST_LAUNCH(1, 64, 0, a.s, fill_range)(x, 3.0f, n / 2, n);
    ASSERT_EQ(cudaEventRecord(e, a.s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b.s, e, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(y, x + n / 2, half, cudaMemcpyDeviceToDevice, b.s), cudaSuccess);
    g.release();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
    cudaEventDestroy(e);
  }
  {  // disjoint halves of one allocation written at the same time, as a gradient bucket reduced
     // beside a kernel writing another: the other stream's bytes changed during the kernel are
     // not taken for the kernel's
    vgpu::CaptureViolations cap;
    g_kernel_wrote = g_kernel_may_end = false;
    // Queued behind a gate, the kernel runs on a's worker (on an idle stream it would run here,
    // on the launching thread, and wait for itself).
    Gate g;
    ASSERT_EQ(cudaLaunchHostFunc(a.s, Gate::wait, &g), cudaSuccess);
    TEST_LAUNCH(1, 64, 0, a.s, fill_range_then_wait)(x, 4.0f, 0, n / 2);
    g.release();
    while (!g_kernel_wrote.load()) std::this_thread::yield();
    ASSERT_EQ(cudaMemsetAsync(x + n / 2, 0x3f, half, b.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);  // the memset has run, inside the kernel's run
    g_kernel_may_end = true;
    ASSERT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(y, x + n / 2, half, cudaMemcpyDeviceToDevice, b.s), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
  }
  cudaFree(x);
  cudaFree(y);
}

TEST(KernelLaunch, MemoryAKernelWritesCountsAsInitialised) {
  Stream st;
  const int64_t n = 64;
  std::vector<float> h(n);
  float* x = device_alloc<float>(n);
  {
    vgpu::CaptureViolations cap;  // reading fresh cudaMalloc memory is reported...
    ASSERT_EQ(cudaMemcpyAsync(h.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, st.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    EXPECT_TRUE(vgpu_test::any_contains(cap.messages(), "uninitialized read")) << joined(cap.messages());
  }
  float* y = device_alloc<float>(n);
  {
    vgpu::CaptureViolations cap;  // ...but not once a kernel wrote it
    TEST_LAUNCH(1, 64, 0, st.s, fill_value)(y, 3.0f, n);
    ASSERT_EQ(cudaMemcpyAsync(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, st.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    EXPECT_TRUE(cap.messages().empty()) << joined(cap.messages());
    EXPECT_EQ(h[n - 1], 3.0f);
  }
  cudaFree(x);
  cudaFree(y);
}

__global__ void count_atomically(int* counter, unsigned long long* total, int* maximum, float* fsum) {
  for (int k = 0; k < 10; ++k) {
    atomicAdd(counter, 1);
    atomicAdd(total, 3ull);
    atomicAdd(fsum, 1.0f);
  }
  atomicMax(maximum, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

TEST(KernelLaunch, AtomicsAcrossBlocksAreExact) {
  Stream st;
  int* counter = device_alloc<int>(2);
  unsigned long long* total = device_alloc<unsigned long long>(1);
  float* fsum = device_alloc<float>(1);
  ASSERT_EQ(cudaMemsetAsync(counter, 0, 2 * sizeof(int), st.s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(total, 0, sizeof(unsigned long long), st.s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(fsum, 0, sizeof(float), st.s), cudaSuccess);
  TEST_LAUNCH(64, 256, 0, st.s, count_atomically)(counter, total, counter + 1, fsum);
  int hc[2];
  unsigned long long ht = 0;
  float hf = 0;
  ASSERT_EQ(cudaMemcpyAsync(hc, counter, sizeof hc, cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&ht, total, sizeof ht, cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&hf, fsum, sizeof hf, cudaMemcpyDeviceToHost, st.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(hc[0], 64 * 256 * 10);
  EXPECT_EQ(hc[1], 64 * 256 - 1);
  EXPECT_EQ(ht, 64ull * 256 * 10 * 3);
  EXPECT_EQ(hf, 64.0f * 256 * 10);  // exact: every partial sum is an integer below 2^24
  cudaFree(counter);
  cudaFree(total);
  cudaFree(fsum);
}

// Blocks of kernels on different streams run on different OS threads at once: the atomics must be
// real. Two threads run grids on the same counter concurrently (the executor alone).
__global__ void hammer(int* counter) {
  for (int k = 0; k < 100; ++k) atomicAdd(counter, 1);
}

TEST(KernelLaunch, AtomicsAreAtomicAcrossConcurrentKernels) {
  int counter = 0;
  auto run = [&] { EXPECT_EQ(vgpu::kernel::run_kernel_sync("hammer", 64, 128, hammer, &counter), cudaSuccess); };
  std::thread t1(run), t2(run);
  t1.join();
  t2.join();
  EXPECT_EQ(counter, 2 * 64 * 128 * 100);
}

__global__ void diverge(int* x) {
  if (threadIdx.x >= 32) return;
  __syncthreads();
  x[threadIdx.x] = 1;
}

TEST(KernelLaunch, ADivergentKernelFailsItsStreamWithAStickyLaunchFailure) {
  in_child_process([] {
    Stream st;
    int* x = device_alloc<int>(64);
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(2, 64, 0, st.s, diverge)(x);
    // The launch itself succeeds; once the kernel has failed, every call returns the sticky error.
    const cudaError_t launch_error = cudaGetLastError();
    CHILD_CHECK(launch_error == cudaSuccess || launch_error == cudaErrorLaunchFailure);
    const cudaError_t e = cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(e == cudaErrorLaunchFailure);
    CHILD_CHECK(vgpu_test::any_contains(m, "barrier divergence: __syncthreads() at "));
    CHILD_CHECK(vgpu_test::any_contains(m, "of kernel diverge (launched at "));
    void* p = nullptr;
    CHILD_CHECK(cudaMalloc(&p, 4) == cudaErrorLaunchFailure);  // the device is unusable
    return true;
  });
}

TEST(KernelLaunch, MemoryOfAnotherDeviceIsReported) {
  in_child_process([] {
    float* x = device_alloc<float>(32);  // device 0
    CHILD_CHECK(cudaSetDevice(1) == cudaSuccess);
    Stream st;  // device 1
    vgpu::CaptureViolations cap;
    TEST_LAUNCH(1, 32, 0, st.s, add_one)(x);
    cudaStreamSynchronize(st.s);
    const auto m = cap.messages();
    std::fprintf(stderr, "%s", joined(m).c_str());
    CHILD_CHECK(vgpu_test::any_contains(m, "argument #1 is memory of device 0, but the kernel runs on device 1"));
    return true;
  });
}

}  // namespace
