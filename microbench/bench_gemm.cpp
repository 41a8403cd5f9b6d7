// OpenBLAS sgemm at the GEMM shapes of one transformer layer of the paper's models, as one
// tensor-parallel rank holds them for t = 1, 2, 4, 8 (Megatron: QKV and fc column-parallel,
// proj and fc2 row-parallel, so their output or input width is divided by t). Forward
// orientation y[rows, n] = x[rows, k] w[n, k]^T; rows = b*s = 512 to keep a 2-core CPU run short.
// A (model, t) pair whose largest GEMM exceeds 80 GFLOP is left out (GPT-3 175B: only t = 8).
//   build/bench_gemm --benchmark_out=results/microbench/bench_gemm.json --benchmark_out_format=json
#include <algorithm>
#include <string>
#include <vector>

#include "core/harness/cpu_workloads.h"
#include "core/model/config.h"
#include "microbench/bench_common.h"

namespace ptdp {
namespace {

constexpr int64_t kRows = 512;
constexpr double kMaxGemmFlops = 80e9;

struct Shape {
  const char* op;
  int64_t n, k;
};

std::vector<Shape> layer_gemms(int64_t h, int t) {
  return {{"qkv", 3 * h / t, h}, {"proj", h, h / t}, {"fc", 4 * h / t, h}, {"fc2", h, 4 * h / t}};
}

// The sgemm of `ptdp accept`'s gemm check (core/harness/cpu_workloads.h); its first call checked
// and untimed (first touch).
void BM_Gemm(benchmark::State& state, int64_t m, int64_t n, int64_t k, int t) {
  const harness::Workload w = harness::sgemm(m, n, k);
  harness::prepare(w, harness::host_clock(), 0);
  const double seconds = bench::time_iterations(state, w, harness::host_clock());
  bench::set_rate(state, "GFLOP/s", w.work / 1e9, seconds);
  state.counters["m"] = double(m);
  state.counters["n"] = double(n);
  state.counters["k"] = double(k);
  state.counters["t"] = t;
}

void register_gemms() {
  for (const char* model : {"gpt-1.7b", "gpt-7.5b", "gpt3-175b"}) {
    const ModelConfig c = preset_config(model);
    for (int t : {1, 2, 4, 8}) {
      const auto shapes = layer_gemms(c.hidden, t);
      double largest = 0;
      for (const auto& s : shapes) largest = std::max(largest, 2.0 * kRows * s.n * s.k);
      if (largest > kMaxGemmFlops) continue;
      for (const auto& s : shapes)
        benchmark::RegisterBenchmark(fmt::format("BM_Gemm/{}/t:{}/{}", model, t, s.op).c_str(), BM_Gemm, kRows, s.n,
                                     s.k, t)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3)
            ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_gemms();
  return ptdp::bench::bench_main(argc, argv, "bench_gemm",
                                 [] { benchmark::AddCustomContext("rows", std::to_string(ptdp::kRows)); });
}
