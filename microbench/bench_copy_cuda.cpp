// Host <-> device and device-to-device copies (cudaMemcpyAsync on the CUDA backend's stream),
// 1 MiB to 1 GiB by x4: h2d and d2h from pinned (cudaMallocHost) and pageable (plain heap)
// host memory, and d2d. Each call is timed with CUDA events after an L2 flush, following three
// warm-up calls; GB/s counts the bytes copied (d2d: read + write, 2 x bytes, as CUDA's
// bandwidthTest and `ptdp accept` count it). The copied bytes are compared with the source
// once per run (counter `wrong`: mismatched bytes). Without a GPU every case is skipped.
//   build/bench_copy_cuda --benchmark_filter='BM_CopyCuda/h2d/pinned/'
//   build/bench_copy_cuda --benchmark_out=results/microbench/bench_copy_cuda.json --benchmark_out_format=json
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"

namespace ptdp {
namespace {

enum class Dir { H2D, D2H, D2D };
enum class HostMem { Pinned, Pageable, None };

// Pinned host memory (cudaMallocHost), freed at scope exit.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) { PTDP_CUDA_CHECK(cudaMallocHost(&p_, bytes)); }
  ~PinnedBuffer() { cudaFreeHost(p_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_ = nullptr;
};

// Host memory of either kind; every page is written before use (no first-touch cost in a copy).
class HostBuffer {
 public:
  HostBuffer(HostMem kind, size_t bytes) {
    if (kind == HostMem::Pinned) pinned_ = std::make_unique<PinnedBuffer>(bytes);
    else pageable_.resize(bytes);
  }
  uint8_t* data() { return pinned_ ? pinned_->data() : pageable_.data(); }

 private:
  std::unique_ptr<PinnedBuffer> pinned_;
  std::vector<uint8_t> pageable_;
};

uint8_t pattern(size_t i) { return uint8_t((i * 131 + 7) % 251); }
void fill_pattern(uint8_t* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = pattern(i);
}
int64_t count_wrong(const uint8_t* p, size_t bytes) {
  int64_t w = 0;
  for (size_t i = 0; i < bytes; ++i) w += p[i] != pattern(i);
  return w;
}

// Device bytes -> a fresh host vector (synchronous on the stream).
std::vector<uint8_t> download(const void* src, size_t bytes, cudaStream_t st) {
  std::vector<uint8_t> host(bytes);
  PTDP_CUDA_CHECK(cudaMemcpyAsync(host.data(), src, bytes, cudaMemcpyDeviceToHost, st));
  PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
  return host;
}

void BM_CopyCuda(benchmark::State& state, Dir dir, HostMem mem, int64_t bytes) {
  Backend* be = bench::backend_or_skip(state);
  if (!be) return;
  try {
    const size_t n = size_t(bytes);
    const cudaStream_t st = cuda_stream(*be);
    // Device buffers from the backend's allocator (sizes are multiples of 4 bytes).
    Tensor dev = be->empty({bytes / 4}, DType::F32), dev2;
    std::unique_ptr<HostBuffer> host;
    void* dst = nullptr;
    const void* src = nullptr;
    cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
    switch (dir) {
      case Dir::H2D:
        host = std::make_unique<HostBuffer>(mem, n);
        fill_pattern(host->data(), n);
        src = host->data();
        dst = dev.raw();
        kind = cudaMemcpyHostToDevice;
        break;
      case Dir::D2H: {
        host = std::make_unique<HostBuffer>(mem, n);
        std::memset(host->data(), 0, n);
        std::vector<uint8_t> staged(n);
        fill_pattern(staged.data(), n);
        PTDP_CUDA_CHECK(cudaMemcpyAsync(dev.raw(), staged.data(), n, cudaMemcpyHostToDevice, st));
        PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
        src = dev.raw();
        dst = host->data();
        kind = cudaMemcpyDeviceToHost;
        break;
      }
      case Dir::D2D: {
        dev2 = be->empty({bytes / 4}, DType::F32);
        std::vector<uint8_t> staged(n);
        fill_pattern(staged.data(), n);
        PTDP_CUDA_CHECK(cudaMemcpyAsync(dev.raw(), staged.data(), n, cudaMemcpyHostToDevice, st));
        PTDP_CUDA_CHECK(cudaMemsetAsync(dev2.raw(), 0, n, st));
        PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
        src = dev.raw();
        dst = dev2.raw();
        break;
      }
    }
    harness::Workload w;
    w.run = [&] { PTDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, st)); };
    // The destination holds the pattern after the first copy, unless it went wrong.
    w.check = [&] {
      PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
      return dir == Dir::D2H ? count_wrong(static_cast<const uint8_t*>(dst), n)
                             : count_wrong(download(dst, n, st).data(), n);
    };
    const int64_t wrong = harness::prepare(w, {}, 2);
    state.counters["wrong"] = double(wrong);
    if (wrong != 0) {
      state.SkipWithError(fmt::format("{} of {} bytes copied wrong (counter `wrong`)", wrong, bytes).c_str());
    } else {
      w.check = nullptr;  // checked above
      const double seconds = bench::time_on_device(state, *be, w, 0);
      const double moved = (dir == Dir::D2D ? 2.0 : 1.0) * double(bytes);
      state.counters["GB/s"] = seconds > 0 ? moved * double(state.iterations()) / seconds / 1e9 : 0.0;
      state.counters["bytes"] = double(bytes);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  bench::release_device_cache(*be);
}

void register_copies() {
  const struct {
    Dir dir;
    HostMem mem;
    const char* name;
  } cases[] = {{Dir::H2D, HostMem::Pinned, "h2d/pinned"},     {Dir::H2D, HostMem::Pageable, "h2d/pageable"},
               {Dir::D2H, HostMem::Pinned, "d2h/pinned"},     {Dir::D2H, HostMem::Pageable, "d2h/pageable"},
               {Dir::D2D, HostMem::None, "d2d/device"}};
  for (const auto& c : cases)
    for (int64_t bytes = int64_t(1) << 20; bytes <= (int64_t(1) << 30); bytes *= 4)
      benchmark::RegisterBenchmark(fmt::format("BM_CopyCuda/{}/bytes:{}", c.name, bytes).c_str(), BM_CopyCuda, c.dir,
                                   c.mem, bytes)
          ->Unit(benchmark::kMicrosecond)
          ->UseManualTime();
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_copies();
  if (ptdp::bench::start_cuda_suite(&argc, argv, "bench_copy_cuda") < 0) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
