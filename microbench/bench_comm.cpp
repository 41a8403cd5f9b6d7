// Collectives and p2p of the local communicator (ranks = threads of this process) in
// nccl-tests' terms: for a message of `bytes` (the whole buffer: all_reduce and broadcast
// in place, all_gather's output, reduce_scatter's input, one send/recv), time per call,
// algbw = bytes / time and busbw = algbw x factor, with nccl-tests' factors: 2(n-1)/n for
// all_reduce, (n-1)/n for all_gather and reduce_scatter, 1 for broadcast and sendrecv
// (a ring: rank r sends to r+1 and receives from r-1). The first call of each benchmark
// checks the results exactly (counter `wrong`, as nccl-tests' #wrong). Rank 0 runs the timed
// loop on the benchmark's thread; ranks 1..n-1 are threads running the same number of calls.
//   build/bench_comm --benchmark_out=results/microbench/bench_comm.json --benchmark_out_format=json
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/harness/collectives.h"
#include "microbench/bench_common.h"

namespace ptdp {
namespace {

using harness::Coll;
using harness::coll_name;

void BM_Coll(benchmark::State& state, Coll coll, int n, int64_t bytes) {
  const int64_t count = bytes / int64_t(sizeof(float));
  auto world = make_local_world(n);
  std::vector<std::unique_ptr<harness::Collective>> ops;
  for (int r = 0; r < n; ++r)
    ops.push_back(std::make_unique<harness::Collective>(harness::Collective{coll, world[r].get(), count}));
  std::atomic<int64_t> wrong{0};
  const benchmark::IterationCount iters = state.max_iterations;
  // Every rank: buffers, one checked call, then `iters` timed calls (rank 0 inside the loop).
  auto prologue = [&](harness::Collective& op) {
    set_cpu_threads(1);
    const harness::Workload w = op.workload();
    wrong += harness::prepare(w, harness::host_clock(), 0);
    return w;
  };
  std::vector<std::thread> helpers;
  for (int r = 1; r < n; ++r)
    helpers.emplace_back([&, r] {
      const harness::Workload w = prologue(*ops[r]);
      for (benchmark::IterationCount i = 0; i < iters; ++i) w.run();
    });
  const harness::Workload w = prologue(*ops[0]);
  const double seconds = bench::time_iterations(state, w, harness::host_clock());
  for (auto& t : helpers) t.join();
  bench::set_rate(state, "algbw_GB/s", bytes / 1e9, seconds);
  bench::set_rate(state, "busbw_GB/s", bytes / 1e9 * w.bus_factor, seconds);
  state.counters["bytes"] = double(bytes);
  state.counters["count"] = double(count);
  state.counters["ranks"] = n;
  state.counters["wrong"] = double(wrong.load());
  if (wrong.load() != 0) state.SkipWithError("wrong results (counter `wrong`)");
}

void register_colls() {
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::SendRecv})
    for (int n : {2, 4})
      for (int64_t bytes = 1 << 10; bytes <= (int64_t(32) << 20); bytes *= 8)
        benchmark::RegisterBenchmark(fmt::format("BM_Comm/{}/ranks:{}/bytes:{}", coll_name(c), n, bytes).c_str(),
                                     BM_Coll, c, n, bytes)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.2)
            ->UseRealTime();
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_colls();
  return ptdp::bench::bench_main(argc, argv, "bench_comm",
                                 [] { benchmark::AddCustomContext("comm", "local (ranks are threads)"); });
}
