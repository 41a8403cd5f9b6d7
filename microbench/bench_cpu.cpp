// CPU microbenchmarks: OpenBLAS sgemm at the GEMM shapes of a transformer layer, and a whole
// training step, of `small` and of a 6-layer h=512 s=512 model, both as GFLOP/s counters. The step's rate over the sgemm
// rate shows how much time goes outside the GEMMs (the budget: at least 50%).
//   build/bench_cpu --benchmark_out=results/bench_cpu.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <unistd.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/blas_core.h"
#include "core/accounting/model_gemms.h"
#include "core/backend/cpu/gemm_rate.h"
#include "core/accounting/flops.h"
#include "core/results/provenance.h"
#include "core/comm/local/local_comm.h"
#include "core/common/median.h"
#include "core/train/run.h"

namespace ptdp {
namespace {

constexpr int kMicroBatch = 4;

// The models measured: 0 `small` (l=4 h=256 a=8 s=256 V=256), 1 a 6-layer h=512 a=8 s=512 V=256.
ModelConfig bench_model(int64_t which) {
  if (which == 0) return preset_config("small");
  ModelConfig c = preset_config("small");
  c.name = "l6-h512-s512";
  c.layers = 6;
  c.hidden = 512;
  c.heads = 8;
  c.seq_length = 512;
  return c;
}

void sgemm_model_shapes(benchmark::State& state, const ModelConfig& c) {
  cpu::SgemmSet set(cpu::model_gemms(c, int64_t(kMicroBatch) * c.seq_length));
  for (auto _ : state) {
    set.run();
    benchmark::DoNotOptimize(set.last_output());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(set.flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_SgemmModelShapes(benchmark::State& state) { sgemm_model_shapes(state, bench_model(0)); }
void BM_SgemmModelShapesL6(benchmark::State& state) { sgemm_model_shapes(state, bench_model(1)); }
BENCHMARK(BM_SgemmModelShapes)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_SgemmModelShapesL6)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

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

void train_step(benchmark::State& state, const ModelConfig& c) {
  // One rank as `ptdp train --micro-batch 4 --global-batch 4 --seed 1` runs it (core/train/run.h).
  RunConfig cfg;
  cfg.model = c;
  cfg.par.micro_batch = kMicroBatch;
  cfg.par.global_batch = kMicroBatch;
  cfg.seed = 1;
  validate_run(cfg);
  auto be = make_cpu_backend();
  const auto world = make_local_world(1);
  TrainingRun run(cfg, *be, *world[0], *world[0]);
  run.set_up_data();
  run.build();
  run.step();  // first touch of every buffer
  for (auto _ : state) benchmark::DoNotOptimize(run.step().loss);
  // Model FLOPs (no recomputation): forward and backward of every GEMM and the attention.
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_model(c, kMicroBatch) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(double(kMicroBatch) * c.seq_length, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_TrainStepSmall(benchmark::State& state) { train_step(state, bench_model(0)); }
void BM_TrainStepL6(benchmark::State& state) { train_step(state, bench_model(1)); }
BENCHMARK(BM_TrainStepSmall)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_TrainStepL6)->Unit(benchmark::kMillisecond)->MinTime(6.0)->UseRealTime();

// Console output as usual, and remembers each benchmark's GFLOP/s, one value per repetition.
class RateReporter : public benchmark::ConsoleReporter {
 public:
  explicit RateReporter(OutputOptions opts) : ConsoleReporter(opts) {}
  std::map<std::string, std::vector<double>> gflops;  // by function name, e.g. BM_TrainStepSmall
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      auto it = r.counters.find("GFLOP/s");
      if (it != r.counters.end() && r.run_type == Run::RT_Iteration)
        gflops[r.run_name.function_name].push_back(it->second);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // The median over the repetitions (--benchmark_repetitions), 0 when the benchmark did not run.
  double median_of(const std::string& name) {
    const std::vector<double>& v = gflops[name];
    return v.empty() ? 0 : median(v);
  }
};

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::cpu::prefer_known_blas_core(argv);  // first: it may start the program again
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("git_sha", ptdp::git_sha());
  benchmark::AddCustomContext("host", ptdp::host_name());
  benchmark::AddCustomContext("device", ptdp::cpu_name());
  benchmark::AddCustomContext("blas", fmt::format("{}, parallel mode {}, {} threads", ptdp::cpu::blas_description(),
                                                  ptdp::cpu::blas_parallel_mode(), ptdp::cpu::blas_num_threads()));
  ptdp::RateReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                    : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  for (auto [model, step_name, gemm_name] : {std::tuple{0, "BM_TrainStepSmall", "BM_SgemmModelShapes"},
                                             std::tuple{1, "BM_TrainStepL6", "BM_SgemmModelShapesL6"}}) {
    const double step = reporter.median_of(step_name), gemm = reporter.median_of(gemm_name);
    if (step <= 0 || gemm <= 0) continue;
    fmt::print("training step of {} (b={}): {:.1f} GFLOP/s = {:.0f}% of sgemm at the model's shapes ({:.1f} GFLOP/s){}\n",
               ptdp::bench_model(model).name, ptdp::kMicroBatch, step, 100.0 * step / gemm, gemm,
               reporter.gflops[step_name].size() > 1 ? ", medians over the repetitions" : "");
  }
  benchmark::Shutdown();
  return 0;
}
