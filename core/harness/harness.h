// The measurement harness of `ptdp accept` and the microbenchmarks: a descriptor per measured
// thing (Workload: its bytes or FLOPs, its bus factor, and the calls that set it up, run it and
// check it, as nccl-tests describes a collective) and one timing engine (the checked first call,
// warm-up calls, then repetitions, each timed through a Clock: the host's clock, CUDA events, NCCL
// over several GPUs). microbench/bench_common.h drives the same engine from Google Benchmark's loop.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace ptdp::harness {

// The rates of repeated measurements. `ptdp accept` reports the best, as STREAM does, and the
// median beside it.
struct Samples {
  std::vector<double> rates;  // one per repetition
  double best() const;
  double median() const;
};

// One measured thing.
struct Workload {
  double work = 0;        // bytes moved or FLOPs of one call
  double unit = 1e9;      // rates are work / second / unit: 1e9 gives GB/s and GFLOP/s, 1e12 TFLOP/s
  double bus_factor = 1;  // a collective's bus bandwidth is its rate x this (collectives.h)
  std::function<void()> init{};    // once, before any call: the inputs (may be empty)
  std::function<void()> run{};     // one call
  std::function<int64_t()> check{};  // after the first call: how many results are wrong; may throw with
                                   // what it found (empty: nothing is checked, and no call is made for it)
  std::function<void()> reset{};   // before each timed call, outside its time (may be empty)
};

// How calls are timed: `ready` runs before the checked call and before each timed call, outside
// the time (wait for a device, meet the other ranks at a barrier; may be empty); `time` runs the
// calls it is handed and returns their seconds.
struct Clock {
  std::function<void()> ready;
  std::function<double(const std::function<void()>&)> time;
};

// The host's steady clock around the calls.
Clock host_clock(std::function<void()> ready = {});
// A timer with `double seconds(F&& calls)` (cuda::FlushedTiming: CUDA events after an L2 flush).
template <class Timing>
Clock timing_clock(Timing& timing) {
  return {{}, [&timing](const std::function<void()>& calls) { return timing.seconds(calls); }};
}

// Before timing: init; with a check, ready, the first call and its check; then `warmup` untimed
// calls. Returns the check's count of wrong results (0 without a check).
int64_t prepare(const Workload& w, const Clock& clock, int warmup);
// One timed interval of `calls` calls (reset and ready before it, outside the time); seconds per
// call. `outside`, when given, runs the reset and ready it is handed (a benchmark pauses its own
// timer around them).
using Outside = std::function<void(const std::function<void()>&)>;
double time_calls(const Workload& w, const Clock& clock, int calls = 1, const Outside& outside = {});
// The rate of one call of `seconds`: work / seconds / unit (algbw), and that x bus_factor (busbw).
double alg_rate(const Workload& w, double seconds);
double bus_rate(const Workload& w, double seconds);

struct Measured {
  Samples samples;     // bus_rate of each repetition
  int64_t wrong = 0;   // prepare's check
};
// prepare, then `reps` timed calls, one a repetition.
Measured measure(const Workload& w, const Clock& clock, int warmup, int reps);

}  // namespace ptdp::harness
