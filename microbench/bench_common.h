// Shared by the Google Benchmark suites: provenance in the JSON context (git sha, host,
// device, BLAS and thread settings), the custom main that every suite uses, and Google
// Benchmark's loop over the measurement harness (core/harness: the timing engine `ptdp accept`
// uses, its workloads registered here as benchmarks, as nccl-tests registers its collectives).
//   build/bench_X --benchmark_out=results/microbench/bench_X.json --benchmark_out_format=json
//   scripts/gbench_to_csv.py results/microbench/bench_X.json   (one CSV row per benchmark)
#pragma once
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/blas_core.h"
#include "core/harness/harness.h"
#include "core/results/provenance.h"

namespace ptdp::bench {

// `device` and `backend`: what the suite runs on (default: this CPU, the cpu backend).
inline void add_context(const char* suite, const std::string& device = cpu_name(), const char* backend = "cpu") {
  benchmark::AddCustomContext("suite", suite);
  benchmark::AddCustomContext("git_sha", git_sha());
  benchmark::AddCustomContext("host", host_name());
  benchmark::AddCustomContext("device", device);
  benchmark::AddCustomContext("backend", backend);
  benchmark::AddCustomContext("hardware_threads", std::to_string(std::thread::hardware_concurrency()));
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("blas", fmt::format("{}, parallel mode {}, {} threads", cpu::blas_description(),
                                                  cpu::blas_parallel_mode(), cpu::blas_num_threads()));
}

// Google Benchmark's loop over a harness workload: each iteration times `calls` calls through
// `clock` (the workload's reset and the clock's ready, if any, outside the time with the
// benchmark's own timer paused), passes the seconds per call to SetIterationTime (read by benchmarks
// registered with UseManualTime) and adds them up. Returns the sum: the time of the timed calls
// alone, from which rates are plain counters in natural units (GFLOP/s, GB/s, % of a reference;
// Google Benchmark's rate counters would be printed with an extra "/s").
inline double time_iterations(benchmark::State& state, const harness::Workload& w, const harness::Clock& clock,
                              int calls = 1) {
  const harness::Outside paused = [&state](const std::function<void()>& before) {
    state.PauseTiming();
    before();
    state.ResumeTiming();
  };
  double seconds = 0;
  for (auto _ : state) {
    const double s = harness::time_calls(w, clock, calls, paused);
    state.SetIterationTime(s);
    seconds += s;
  }
  return seconds;
}

// The same for a call with nothing to set up: the host's clock around `run`.
template <class F>
double time_iterations(benchmark::State& state, F&& run) {
  return time_iterations(state, harness::Workload{.run = std::forward<F>(run)}, harness::host_clock());
}

// counters[name] = per_iteration x iterations / seconds (0 when nothing was timed).
inline void set_rate(benchmark::State& state, const char* name, double per_iteration, double seconds) {
  state.counters[name] = seconds > 0 ? per_iteration * double(state.iterations()) / seconds : 0.0;
}

// The custom main of a suite (instead of BENCHMARK_MAIN): flags, context, run, shutdown.
// `before_run` may add context or measure a reference (e.g. the STREAM bandwidth).
template <class F>
int bench_main(int argc, char** argv, const char* suite, F&& before_run) {
  cpu::prefer_known_blas_core(argv);  // first: it may start the program again
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  add_context(suite);
  before_run();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
inline int bench_main(int argc, char** argv, const char* suite) {
  return bench_main(argc, argv, suite, [] {});
}

}  // namespace ptdp::bench
