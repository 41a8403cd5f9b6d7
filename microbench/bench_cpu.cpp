// CPU microbenchmarks: OpenBLAS sgemm at the GEMM shapes of a transformer layer, and a whole
// training step of the `small` model, both as GFLOP/s counters. The step's rate over the sgemm
// rate shows how much time goes outside the GEMMs (the budget: at least 50%).
//   build/bench_cpu --benchmark_out=results/bench_cpu.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <unistd.h>

#include <map>
#include <vector>

#include "core/backend/cpu/blas.h"
#include "core/data/samples.h"
#include "core/runtime/flops.h"
#include "core/runtime/provenance.h"
#include "core/train/trainer.h"

namespace ptdp {
namespace {

constexpr int kMicroBatch = 4;

struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
};

// The GEMMs of one layer's forward and backward pass and of the output layer, for rows tokens.
std::vector<Gemm> model_gemms(const ModelConfig& c, int64_t rows) {
  const int64_t h = c.hidden, f = c.ffn_hidden(), v = c.padded_vocab(1);
  std::vector<Gemm> g;
  for (auto [out, in] : {std::pair{3 * h, h}, {h, h}, {f, h}, {h, f}, {v, h}}) {
    g.push_back({false, true, rows, out, in});   // forward: y = x w^T
    g.push_back({false, false, rows, in, out});  // input grad: dx = dy w
    g.push_back({true, false, out, in, rows});   // weight grad: dw = dy^T x
  }
  return g;
}

void BM_SgemmModelShapes(benchmark::State& state) {
  ModelConfig c = preset_config("small");
  auto gemms = model_gemms(c, int64_t(kMicroBatch) * c.seq_length);
  double flops = 0;
  std::vector<std::vector<float>> a, b, out;
  for (const auto& g : gemms) {
    a.emplace_back(g.m * g.k, 0.01f);
    b.emplace_back(g.k * g.n, 0.02f);
    out.emplace_back(g.m * g.n, 0.0f);
    flops += 2.0 * g.m * g.n * g.k;
  }
  for (auto _ : state) {
    for (size_t i = 0; i < gemms.size(); ++i) {
      const Gemm& g = gemms[i];
      cpu::gemm<float>(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a[i].data(), g.ta ? g.m : g.k, b[i].data(),
                       g.tb ? g.k : g.n, 0.0f, out[i].data(), g.n);
    }
    benchmark::DoNotOptimize(out.back().data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SgemmModelShapes)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_Sgemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::vector<float> a(m * k, 0.01f), b(k * n, 0.02f), out(m * n);
  for (auto _ : state) {
    cpu::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
// small, b=4: rows 1024; qkv, proj, fc, fc2 and the output layer (V=256).
BENCHMARK(BM_Sgemm)
    ->ArgNames({"m", "n", "k"})
    ->Args({1024, 768, 256})
    ->Args({1024, 256, 256})
    ->Args({1024, 1024, 256})
    ->Args({1024, 256, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_TrainStepSmall(benchmark::State& state) {
  ModelConfig c = preset_config("small");
  auto be = make_cpu_backend();
  Gpt model(c, ShardSpec{}, *be, DType::F32);
  model.init(1);
  SyntheticSamples data(c.vocab_size, c.seq_length, 1);
  TrainConfig tc;
  tc.micro_batch = kMicroBatch;
  tc.global_batch = kMicroBatch;
  Trainer trainer(model, data, tc);
  trainer.step();  // first touch of every buffer
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step().loss);
  // Model FLOPs (no recomputation): forward and backward of every GEMM and the attention.
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_model(c, kMicroBatch) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(double(kMicroBatch) * c.seq_length, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStepSmall)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

// Console output as usual, and remembers each benchmark's GFLOP/s.
class RateReporter : public benchmark::ConsoleReporter {
 public:
  explicit RateReporter(OutputOptions opts) : ConsoleReporter(opts) {}
  std::map<std::string, double> gflops;  // by function name, e.g. BM_TrainStepSmall
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      auto it = r.counters.find("GFLOP/s");
      if (it != r.counters.end() && r.run_type == Run::RT_Iteration) gflops[r.run_name.function_name] = it->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("git_sha", ptdp::git_sha());
  benchmark::AddCustomContext("host", ptdp::host_name());
  benchmark::AddCustomContext("device", ptdp::cpu_name());
  benchmark::AddCustomContext("blas", fmt::format("OpenBLAS, parallel mode {}, {} threads",
                                                  ptdp::cpu::blas_parallel_mode(), ptdp::cpu::blas_num_threads()));
  ptdp::RateReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                    : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto& g = reporter.gflops;
  if (g.count("BM_SgemmModelShapes") && g.count("BM_TrainStepSmall")) {
    double step = g["BM_TrainStepSmall"], gemm = g["BM_SgemmModelShapes"];
    fmt::print("training step of small (b={}): {:.1f} GFLOP/s = {:.0f}% of sgemm at the model's shapes ({:.1f} GFLOP/s)\n",
               ptdp::kMicroBatch, step, 100.0 * step / gemm, gemm);
  }
  benchmark::Shutdown();
  return 0;
}
