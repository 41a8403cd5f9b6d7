// Shared by the CUDA suites: one CUDA backend for the process (or the reason there is none),
// Google Benchmark's loop over a call timed with CUDA events after an L2 flush (the harness's
// engine with core/backend/cuda/measure.h's timing), and random device data.
#pragma once
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <string>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/measure.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/event_timer.h"
#include "core/common/rng.h"
#include "microbench/bench_common.h"

namespace ptdp::bench {

// The CUDA backend on device 0, made once and kept to the end of the process; null without
// a GPU, with `reason` set.
inline Backend* cuda_backend(std::string* reason) {
  static std::string why;
  static Backend* be = [] {
    std::string r;
    if (cuda::device_count(&r) == 0) {
      why = "no CUDA device: " + r;
      return static_cast<Backend*>(nullptr);
    }
    return make_cuda_backend(0).release();  // never destroyed: the CUDA runtime may be gone at exit
  }();
  if (!be && reason) *reason = why;
  return be;
}

// `w` after `warmup` untimed calls (and its check, if any, first), then Google Benchmark's loop,
// each call timed on the backend's stream with CUDA events after an L2 flush; the timed seconds.
inline double time_on_device(benchmark::State& state, Backend& be, const harness::Workload& w, int warmup = 3) {
  harness::prepare(w, {}, warmup);
  be.synchronize();
  cuda::FlushedTiming timing(be);
  return time_iterations(state, w, harness::timing_clock(timing));
}

// The start of a CUDA suite's main: parses the flags and records the context (the device, or
// why there is none, and the CUDA versions). Returns the number of GPUs, -1 on unknown flags.
// `devices` names the device context from the GPU count (default: GPU 0's name).
inline int start_cuda_suite(int* argc, char** argv, const char* suite,
                            const std::function<std::string(int)>& devices = nullptr) {
  benchmark::Initialize(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) return -1;
  std::string reason;
  const int n = cuda::device_count(&reason);
  const std::string device =
      n == 0 ? "no CUDA device (" + reason + ")" : devices ? devices(n) : cuda::device_name(0);
  add_context(suite, device, "cuda");
  benchmark::AddCustomContext("cuda", cuda::versions());
  return n;
}

// The CUDA backend for one benchmark; null (the benchmark skipped with the reason) without a GPU.
inline Backend* backend_or_skip(benchmark::State& state) {
  std::string reason;
  Backend* be = cuda_backend(&reason);
  if (!be) state.SkipWithError(reason.c_str());
  return be;
}

// Uniform values in [lo, hi) in t's dtype: a block of up to 1 Mi random elements, repeated.
inline void fill_random(Backend& be, Tensor& t, uint64_t seed, double lo = -1, double hi = 1) {
  const int64_t block = std::min<int64_t>(t.numel(), int64_t(1) << 20);
  if (block == 0) return;
  Tensor host = Tensor::empty({block}, DType::F32);
  for (int64_t i = 0; i < block; ++i)
    host.data<float>()[i] = float(lo + (hi - lo) * uniform01(seed, 0, uint64_t(i)));
  cuda::fill_repeating(be, t, host);
}

// Gives the suite's cached device memory back, so that later shapes do not run out.
inline void release_device_cache(Backend& be) {
  be.synchronize();
  cuda::DeviceAllocator::for_device(cuda_device(be)).release_cached();
}

}  // namespace ptdp::bench
