// cuBLAS GEMMs at the transformer-layer shapes of bench_gemm (gpt-1.7b, gpt-18b, GPT-3 175B at
// t = 1, 2, 4, 8: QKV and fc column-parallel, proj and fc2 row-parallel), forward orientation
// y[rows, n] = x[rows, k] w[n, k]^T with rows = b*s = 8192 (b = 4, s = 2048), f16 and bf16 inputs
// with f32 accumulation, as the paper's mixed-precision training runs them. Each call is timed
// with CUDA events after the L2 cache is flushed (a memset of twice its size), and TFLOP/s
// counts the timed calls only. BM_LinearCuda times the CUDA backend's own path (cuBLASLt,
// f32 compute, cached plans): linear_forward (fwd), linear_backward with dx and dw (bwd), and
// the dw += dy^T x product into f32 alone (dw), at h = 2048, 4096, 8192, 12288 and
// t = 1, 2, 4, 8, on random data, after three warm-up calls. Built with the CUDA backend;
// without a GPU every benchmark is skipped with the reason, so CI can build and run it.
//   build/bench_gemm_cuda --benchmark_filter='BM_LinearCuda/h:12288/t:8/'
//   build/bench_gemm_cuda --benchmark_out=results/microbench/bench_gemm_cuda.json --benchmark_out_format=json
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend/cuda/device_info.h"
#include "core/model/config.h"
#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"

namespace ptdp {
namespace {

constexpr int64_t kRows = 8192;

[[noreturn]] void fail(const std::string& call, const std::string& what, const char* file, int line) {
  throw std::runtime_error(fmt::format("{} failed: {} ({}:{})", call, what, file, line));
}
#define PTDP_CUDA_OK(call)                                                                 \
  do {                                                                                     \
    const cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) ::ptdp::fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)
#define PTDP_CUBLAS_OK(call)                                                                              \
  do {                                                                                                    \
    const cublasStatus_t s_ = (call);                                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::ptdp::fail(#call, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { PTDP_CUDA_OK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    PTDP_CUDA_OK(cudaEventCreate(&start));
    PTDP_CUDA_OK(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

// Runs body(handle) with a cuBLAS handle on device 0, or marks the benchmark skipped with the
// reason: no GPU, or a call that failed.
template <class Body> void with_cublas(benchmark::State& state, Body body) {
  std::string reason;
  if (cuda::device_count(&reason) == 0) {
    state.SkipWithError(("no CUDA device: " + reason).c_str());
    return;
  }
  try {
    cublasHandle_t handle;
    PTDP_CUBLAS_OK(cublasCreate(&handle));
    std::unique_ptr<cublasContext, void (*)(cublasHandle_t)> own(handle, [](cublasHandle_t h) { cublasDestroy(h); });
    body(handle);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Google Benchmark's loop over `call` after one untimed call (heuristics, workspace, first
// touch), each batch of calls timed with CUDA events on the default stream; with `flush`, its
// bytes are set before the first event (the L2 cache emptied, outside the timing). The seconds.
double time_with_events(benchmark::State& state, const std::function<void()>& call,
                        const DeviceBuffer* flush = nullptr, size_t flush_bytes = 0) {
  call();
  PTDP_CUDA_OK(cudaDeviceSynchronize());
  Events ev;
  const harness::Clock clock{{}, [&](const std::function<void()>& calls) {
                               if (flush) PTDP_CUDA_OK(cudaMemsetAsync(flush->p, 0, flush_bytes));
                               PTDP_CUDA_OK(cudaEventRecord(ev.start));
                               calls();
                               PTDP_CUDA_OK(cudaEventRecord(ev.stop));
                               PTDP_CUDA_OK(cudaEventSynchronize(ev.stop));
                               float ms = 0;
                               PTDP_CUDA_OK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
                               return ms / 1e3;
                             }};
  return bench::time_iterations(state, harness::Workload{.run = call}, clock);
}

void BM_GemmCuda(benchmark::State& state, int64_t m, int64_t n, int64_t k, int t, cudaDataType_t type) {
  with_cublas(state, [&](cublasHandle_t handle) {
    int l2 = 0;
    PTDP_CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    DeviceBuffer x(m * k * 2), w(n * k * 2), y(m * n * 2), flush(size_t(2) * l2);
    PTDP_CUDA_OK(cudaMemset(x.p, 0x3c, m * k * 2));  // small finite halves
    PTDP_CUDA_OK(cudaMemset(w.p, 0x3c, n * k * 2));
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&] {
      PTDP_CUBLAS_OK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w.p, type, int(k),
                                  x.p, type, int(k), &beta, y.p, type, int(n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    };
    // After a memset of twice the L2 size.
    const double seconds = time_with_events(state, gemm, &flush, size_t(2) * l2);
    state.counters["TFLOP/s"] = seconds > 0 ? 2.0 * m * n * k * double(state.iterations()) / seconds / 1e12 : 0.0;
    state.counters["m"] = double(m);
    state.counters["n"] = double(n);
    state.counters["k"] = double(k);
    state.counters["t"] = t;
  });
}

// The attention core's batched products at one head dimension: b * heads strided GEMMs of
// Q K^T (m = n = s, k = hd) or P V (m = hd, n = s, k = s), as ptdp's attention_forward and
// Megatron's baddbmm/bmm run them (Figure 7's model: h 4096 with 128 heads of 32; the same
// hidden size with 64 heads of 64 and 32 of 128 beside it, to show what k = 32 costs).
void BM_AttnGemmCuda(benchmark::State& state, bool scores, int64_t s, int64_t hd, int64_t batch,
                     cudaDataType_t type) {
  with_cublas(state, [&](cublasHandle_t handle) {
    const int64_t m = scores ? s : hd, n = s, k = scores ? hd : s;
    DeviceBuffer a(size_t(batch) * m * k * 2), bm(size_t(batch) * k * n * 2), c(size_t(batch) * m * n * 2);
    PTDP_CUDA_OK(cudaMemset(a.p, 0x3c, size_t(batch) * m * k * 2));
    PTDP_CUDA_OK(cudaMemset(bm.p, 0x3c, size_t(batch) * k * n * 2));
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&] {
      PTDP_CUBLAS_OK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &alpha, a.p,
                                                type, int(k), m * k, bm.p, type, int(k), k * n, &beta, c.p, type,
                                                int(m), m * n, int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    const double seconds = time_with_events(state, gemm);
    const double flops = 2.0 * m * n * k * batch;
    state.counters["TFLOP/s"] = seconds > 0 ? flops * double(state.iterations()) / seconds / 1e12 : 0.0;
    state.counters["hd"] = double(hd);
    state.counters["batch"] = double(batch);
  });
}

void register_attention_gemms() {
  constexpr int64_t kHidden = 4096, kSeq = 2048;
  for (int64_t hd : {32, 64, 128})
    for (int64_t b : {1, 4, 16})
      for (bool scores : {true, false})
        for (auto [type, name] : {std::pair{CUDA_R_16F, "f16"}, std::pair{CUDA_R_16BF, "bf16"}})
          benchmark::RegisterBenchmark(fmt::format("BM_AttnGemmCuda/hd:{}/b:{}/{}/{}", hd, b,
                                                   scores ? "qk" : "pv", name).c_str(),
                                       BM_AttnGemmCuda, scores, kSeq, hd, b * (kHidden / hd), type)
              ->Unit(benchmark::kMicrosecond)
              ->UseManualTime();
}

// fwd: linear_forward (2mnk FLOPs); bwd: linear_backward with dx and dw (4mnk); dw: with no
// dx, the weight-gradient product alone (2mnk).
enum class Pass { Forward, Backward, WeightGrad };

// One linear layer y[rows, n] = x[rows, k] w[n, k]^T through the CUDA backend.
void BM_LinearCuda(benchmark::State& state, Pass pass, int64_t rows, int64_t n, int64_t k, int t, DType dt) {
  Backend* be = bench::backend_or_skip(state);
  if (!be) return;
  try {
    Tensor x = be->empty({rows, k}, dt), w = be->empty({n, k}, dt), y = be->empty({rows, n}, dt);
    bench::fill_random(*be, x, 1);
    bench::fill_random(*be, w, 2, -0.05, 0.05);
    bench::fill_random(*be, y, 3);  // the output grad dy in the backward passes
    Tensor dx = pass == Pass::Backward ? be->empty({rows, k}, dt) : Tensor();
    Tensor dw = pass == Pass::Forward ? Tensor() : be->empty({n, k}, DType::F32);
    if (dw.defined()) be->fill(dw, 0.0);
    auto call = [&] {
      if (pass == Pass::Forward)
        be->linear_forward(y, x, w, nullptr);
      else
        be->linear_backward(pass == Pass::Backward ? &dx : nullptr, false, dw, nullptr, y, x, w);
    };
    const double seconds = bench::time_on_device(state, *be, harness::Workload{.run = call});
    const double flops = (pass == Pass::Backward ? 4.0 : 2.0) * double(rows) * double(n) * double(k);
    state.counters["TFLOP/s"] = seconds > 0 ? flops * double(state.iterations()) / seconds / 1e12 : 0.0;
    state.counters["m"] = double(rows);
    state.counters["n"] = double(n);
    state.counters["k"] = double(k);
    state.counters["t"] = t;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  bench::release_device_cache(*be);
}

void register_gemms() {
  for (const char* model : {"gpt-1.7b", "gpt-18b", "gpt3-175b"}) {
    const int64_t h = preset_config(model).hidden;
    for (int t : {1, 2, 4, 8}) {
      const struct {
        const char* op;
        int64_t n, k;
      } shapes[] = {{"qkv", 3 * h / t, h}, {"proj", h, h / t}, {"fc", 4 * h / t, h}, {"fc2", h, 4 * h / t}};
      for (const auto& s : shapes)
        for (auto [type, name] : {std::pair{CUDA_R_16F, "f16"}, std::pair{CUDA_R_16BF, "bf16"}})
          benchmark::RegisterBenchmark(fmt::format("BM_GemmCuda/{}/t:{}/{}/{}", model, t, s.op, name).c_str(),
                                       BM_GemmCuda, kRows, s.n, s.k, t, type)
              ->Unit(benchmark::kMicrosecond)
              ->UseManualTime();
    }
  }
  for (int64_t h : {2048, 4096, 8192, 12288})
    for (int t : {1, 2, 4, 8}) {
      const struct {
        const char* op;
        int64_t n, k;
      } shapes[] = {{"qkv", 3 * h / t, h}, {"proj", h, h / t}, {"fc", 4 * h / t, h}, {"fc2", h, 4 * h / t}};
      for (const auto& s : shapes)
        for (auto [pass, pass_name] : {std::pair{Pass::Forward, "fwd"}, std::pair{Pass::Backward, "bwd"},
                                       std::pair{Pass::WeightGrad, "dw"}})
          for (auto [dt, name] : {std::pair{DType::BF16, "bf16"}, std::pair{DType::F16, "f16"}})
            benchmark::RegisterBenchmark(
                fmt::format("BM_LinearCuda/h:{}/t:{}/{}/{}/{}", h, t, s.op, pass_name, name).c_str(), BM_LinearCuda,
                pass, kRows, s.n, s.k, t, dt)
                ->Unit(benchmark::kMicrosecond)
                ->UseManualTime();
    }
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_gemms();
  ptdp::register_attention_gemms();
  if (ptdp::bench::start_cuda_suite(&argc, argv, "bench_gemm_cuda") < 0) return 1;
  benchmark::AddCustomContext("rows", std::to_string(ptdp::kRows));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
