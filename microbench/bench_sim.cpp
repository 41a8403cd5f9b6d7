// Speed of the performance model (core/sim): one simulated iteration of the 1T model on 3072
// GPUs (p = 64, m = 512: 64 stages replayed action by action), and the planner's search over
// every layout of it on 3072 GPUs, pruned (what `ptdp plan` does) and exhaustive.
//   build/bench_sim --benchmark_out=results/microbench/bench_sim.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include "core/model/config.h"
#include "core/sim/hardware.h"
#include "core/sim/paper_setups.h"
#include "core/sim/planner.h"
#include "core/sim/simulator.h"

namespace ptdp::sim {
namespace {

const HardwareProfile& selene() {
  static const HardwareProfile hw = load_profile("a100-selene");
  return hw;
}

void BM_Simulate1TOn3072Gpus(benchmark::State& state) {
  const RunConfig c = paper_run(128, 25600, 160, 8, 64, 6, 1, 3072);  // Table 1, last row
  double tflops = 0;
  for (auto _ : state) {
    const SimResult r = simulate(c, selene());
    tflops = r.tflops_per_gpu;  // (DoNotOptimize on a double garbles it with GCC and benchmark 1.7)
    benchmark::ClobberMemory();
  }
  state.counters["actions"] = 64.0 * 512 * 6 - 2 * 512;  // recv/compute/send per micro-batch and stage
  state.counters["tflops_per_gpu"] = benchmark::Counter(tflops);
}
BENCHMARK(BM_Simulate1TOn3072Gpus)->Unit(benchmark::kMillisecond)->UseRealTime();

// A plan for `model` on 3072 GPUs with B = 3072.
void plan_on_3072(benchmark::State& state, const char* model, bool exhaustive) {
  PlanRequest req;
  req.model = preset_config(model);
  req.gpus = 3072;
  req.global_batch = 3072;
  req.exhaustive = exhaustive;
  PlanResult res;
  for (auto _ : state) {
    res = plan(req, selene());
    benchmark::ClobberMemory();
  }
  state.counters["layouts"] = double(res.layouts);
  state.counters["fit"] = double(res.fit);
  state.counters["simulated"] = double(res.simulated);
}

void BM_Plan1TOn3072Gpus(benchmark::State& state) { plan_on_3072(state, "gpt-1t", false); }
BENCHMARK(BM_Plan1TOn3072Gpus)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Plan1TOn3072GpusExhaustive(benchmark::State& state) { plan_on_3072(state, "gpt-1t", true); }
BENCHMARK(BM_Plan1TOn3072GpusExhaustive)->Unit(benchmark::kMillisecond)->UseRealTime();

// A model with many layouts that fit: GPT-3 175B on 3072 GPUs, every fitting layout simulated.
void BM_Plan175BOn3072GpusExhaustive(benchmark::State& state) { plan_on_3072(state, "gpt3-175b", true); }
BENCHMARK(BM_Plan175BOn3072GpusExhaustive)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace ptdp::sim

BENCHMARK_MAIN();
