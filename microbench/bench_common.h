// Shared by the Google Benchmark suites: provenance in the JSON context (git sha, host,
// device, BLAS and thread settings) and the custom main that every suite uses.
//   build/bench_X --benchmark_out=results/microbench/bench_X.json --benchmark_out_format=json
//   scripts/gbench_to_csv.py results/microbench/bench_X.json   (one CSV row per benchmark)
#pragma once
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/backend/cpu/blas.h"
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
  benchmark::AddCustomContext("blas", fmt::format("OpenBLAS, parallel mode {}, {} threads", cpu::blas_parallel_mode(),
                                                  cpu::blas_num_threads()));
}

// Wall time of the work inside the timed loop, accumulated call by call, so that rates can be
// plain counters in natural units (GFLOP/s, GB/s, % of a reference): Google Benchmark's rate
// counters would be printed with an extra "/s". Works with PauseTiming (only timed calls count).
class WorkTimer {
 public:
  template <class F>
  void time(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double seconds() const { return seconds_; }

 private:
  double seconds_ = 0;
};

// counters[name] = per_iteration x iterations / seconds (0 when nothing was timed).
inline void set_rate(benchmark::State& state, const char* name, double per_iteration, const WorkTimer& t) {
  state.counters[name] = t.seconds() > 0 ? per_iteration * double(state.iterations()) / t.seconds() : 0.0;
}

// The custom main of a suite (instead of BENCHMARK_MAIN): flags, context, run, shutdown.
// `before_run` may add context or measure a reference (e.g. the STREAM bandwidth).
template <class F>
int bench_main(int argc, char** argv, const char* suite, F&& before_run) {
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
