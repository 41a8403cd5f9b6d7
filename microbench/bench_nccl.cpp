// NCCL collectives over every visible GPU of this process, as nccl-tests runs them in one
// thread (-g N), on the node `ptdp accept` measures with (core/comm/nccl/nccl_node.h): one
// communicator per GPU made together (ncclCommInitAll), one stream per GPU (that GPU's CUDA
// backend's stream; the backend also allocates and fills the buffers), each call a
// ncclGroupStart/End over the GPUs, timed by the harness's engine (core/harness). f32 messages of 8 B to 1 GiB by x8, out of place:
// all_reduce (sum), all_gather, reduce_scatter (sum), broadcast (root 0) and sendrecv (a ring:
// GPU i sends to i+1, receives from i-1). Size is the whole buffer, as in nccl-tests and
// bench_comm (all_gather's output, reduce_scatter's input, there rounded down to a multiple of
// the GPU count, at least one element per GPU: counter `bytes`); algbw = size / time, busbw =
// algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter), 1 (broadcast, sendrecv).
// After 5 warm-up calls (nccl-tests' -w 5), each iteration times 20 back-to-back calls (-n 20)
// with CUDA events on every GPU: time per call = the longest GPU's time / 20, at least 0.05 s
// of it per case. The first run of each case checks every output element exactly (counter
// `wrong`, nccl-tests' #wrong). One GPU still runs every case; the (n-1)/n factors then make
// busbw 0 for all_reduce, all_gather and reduce_scatter (the label says so). Without a GPU every
// case is skipped with the reason.
//   build/bench_nccl --benchmark_filter='BM_Nccl/all_reduce/'
//   build/bench_nccl --benchmark_out=results/microbench/bench_nccl.json --benchmark_out_format=json
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/nccl/nccl_node.h"
#include "core/common/error.h"
#include "core/harness/collectives.h"
#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"

namespace ptdp {
namespace {

using harness::bus_factor;
using harness::Coll;
using harness::coll_name;

constexpr int kWarmup = 5;               // nccl-tests -w 5
constexpr int kCallsPerIteration = 20;   // nccl-tests -n 20

// One case's buffers on every GPU: `in` is sent, `out` receives (count elements each, or the
// per-GPU chunk where the collective takes or gives one).
struct Case {
  Coll coll = Coll::AllReduce;
  int n = 0;
  int64_t count = 0;  // f32 elements of the message (the whole buffer)
  int64_t chunk = 0;  // all_gather and reduce_scatter: elements per GPU (count = chunk * n)
  std::vector<Tensor> in, out;
  int64_t bytes() const { return count * int64_t(sizeof(float)); }
};

// Buffers for `coll` with a message of `bytes`, inputs filled (GPU i contributes i + 1;
// broadcast's root sends 42) and outputs set to -1.
Case make_case(NcclNode& node, Coll coll, int64_t bytes) {
  Case c;
  c.coll = coll;
  c.n = node.size();
  c.count = bytes / int64_t(sizeof(float));
  if (coll == Coll::AllGather || coll == Coll::ReduceScatter) {
    c.chunk = std::max<int64_t>(1, c.count / c.n);
    c.count = c.chunk * c.n;
  }
  for (int i = 0; i < c.n; ++i) {
    Backend& be = node.backend(i);
    const int64_t in = coll == Coll::AllGather ? c.chunk : c.count;
    const int64_t out = coll == Coll::ReduceScatter ? c.chunk : c.count;
    c.in.push_back(be.empty({in}, DType::F32));
    c.out.push_back(be.empty({out}, DType::F32));
    be.fill(c.in.back(), coll == Coll::Broadcast ? (i == 0 ? 42.0 : 0.0) : double(i + 1));
    be.fill(c.out.back(), -1.0);
  }
  return c;
}

// GPU i's call of the case's collective, out of place.
void launch(NcclNode& node, const Case& c, int i) {
  const ncclComm_t comm = node.comm(i);
  const cudaStream_t st = node.stream(i);
  const void* in = c.in[i].raw();
  void* out = c.out[i].raw();
  const size_t count = size_t(c.count), chunk = size_t(c.chunk);
  switch (c.coll) {
    case Coll::AllReduce: PTDP_NCCL_OK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, st)); break;
    case Coll::AllGather: PTDP_NCCL_OK(ncclAllGather(in, out, chunk, ncclFloat32, comm, st)); break;
    case Coll::ReduceScatter: PTDP_NCCL_OK(ncclReduceScatter(in, out, chunk, ncclFloat32, ncclSum, comm, st)); break;
    case Coll::Broadcast: PTDP_NCCL_OK(ncclBroadcast(in, out, count, ncclFloat32, 0, comm, st)); break;
    case Coll::SendRecv: {
      const int n = node.size();
      PTDP_NCCL_OK(ncclSend(in, count, ncclFloat32, (i + 1) % n, comm, st));
      PTDP_NCCL_OK(ncclRecv(out, count, ncclFloat32, (i + n - 1) % n, comm, st));
      break;
    }
  }
}

// Output elements that differ from the closed-form result, over every GPU (after a run).
int64_t count_wrong(NcclNode& node, const Case& c) {
  const int n = c.n;
  int64_t wrong = 0;
  Tensor host = Tensor::empty({c.out[0].numel()}, DType::F32);
  for (int i = 0; i < n; ++i) {
    node.backend(i).copy(host, c.out[i]);  // device -> host, after the NCCL work on the same stream
    const float* p = host.data<float>();
    const int64_t m = host.numel();
    auto count_ne = [&](auto expected) {
      for (int64_t e = 0; e < m; ++e) wrong += p[e] != expected(e);
    };
    switch (c.coll) {
      case Coll::AllReduce:
      case Coll::ReduceScatter: count_ne([&](int64_t) { return float(n * (n + 1) / 2); }); break;
      case Coll::AllGather: count_ne([&](int64_t e) { return float(e / c.chunk + 1); }); break;
      case Coll::Broadcast: count_ne([](int64_t) { return 42.0f; }); break;
      case Coll::SendRecv: count_ne([&](int64_t) { return float((i + n - 1) % n + 1); }); break;
    }
  }
  return wrong;
}

// PTDP_NCCL_RANKS_PER_GPU=k: k ranks on every GPU (NCCL 2.30 and later, with
// NCCL_MULTI_RANK_GPU_ENABLE=1): the collectives' results and same-GPU times, not link bandwidth.
int ranks_per_gpu() {
  const char* v = std::getenv("PTDP_NCCL_RANKS_PER_GPU");
  return v ? std::max(1, std::atoi(v)) : 1;
}

std::unique_ptr<NcclNode>& node_slot() {
  static std::unique_ptr<NcclNode> node;
  return node;
}

// The process's node over every visible GPU, made on first use; null with `reason` when there
// is no GPU, NCCL could not start, or an earlier error aborted it.
NcclNode* nccl_node(std::string* reason) {
  static std::string why;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::string r;
    const int gpus = cuda::device_count(&r);
    if (gpus == 0) {
      why = "no CUDA device: " + r;
    } else {
      try {
        std::vector<int> devices;
        for (int d = 0; d < gpus; ++d) devices.insert(devices.end(), size_t(ranks_per_gpu()), d);
        node_slot() = std::make_unique<NcclNode>(devices);
      } catch (const std::exception& e) {
        why = fmt::format("NCCL over {} GPU(s) could not start: {}", gpus, e.what());
      }
    }
  }
  NcclNode* node = node_slot().get();
  if (node && !node->broken().empty()) {
    *reason = "NCCL " + node->broken();
    return nullptr;
  }
  if (!node) *reason = why;
  return node;
}

void BM_Nccl(benchmark::State& state, Coll coll, int64_t nominal_bytes) {
  std::string reason;
  NcclNode* node = nccl_node(&reason);
  if (!node) {
    state.SkipWithError(reason.c_str());
    return;
  }
  try {
    const int n = node->size();
    const Case c = make_case(*node, coll, nominal_bytes);
    harness::Workload w{.work = double(c.bytes()), .bus_factor = bus_factor(coll, n)};
    w.run = [node, &c] { node->group([&](int i) { launch(*node, c, i); }); };
    // The first run of a case checks its outputs; later runs (Google Benchmark runs a case
    // several times while it picks the iteration count) report that check.
    static std::map<std::pair<Coll, int64_t>, int64_t> checked;
    const auto key = std::pair{coll, nominal_bytes};
    const bool first = !checked.count(key);
    if (first)
      w.check = [node, &c] {
        node->wait(coll_name(c.coll));
        return count_wrong(*node, c);
      };
    int64_t wrong = harness::prepare(w, {}, kWarmup);
    if (first) checked[key] = wrong;
    else wrong = checked.at(key);
    state.counters["wrong"] = double(wrong);
    if (wrong != 0) {
      state.SkipWithError(fmt::format("{} wrong output values (counter `wrong`)", wrong).c_str());
    } else {
      const harness::Clock clock{{}, [node, coll](const std::function<void()>& calls) {
                                   return node->seconds(coll_name(coll), calls);
                                 }};
      const double seconds = bench::time_iterations(state, w, clock, kCallsPerIteration);
      const double algbw = seconds > 0 ? double(c.bytes()) * double(state.iterations()) / seconds / 1e9 : 0.0;
      state.counters["algbw_GB/s"] = algbw;
      state.counters["busbw_GB/s"] = algbw * w.bus_factor;
      state.counters["bytes"] = double(c.bytes());
      state.counters["count"] = double(c.count);
      state.counters["gpus"] = n;
      if (ranks_per_gpu() > 1)
        state.SetLabel(fmt::format("{} ranks on each GPU: same-GPU copies, not link bandwidth", ranks_per_gpu()));
      else if (n == 1)
        state.SetLabel(bus_factor(coll, 1) == 0
                           ? "1 GPU: busbw is 0 by nccl-tests' factor (n-1)/n"
                           : "1 GPU: busbw = algbw (factor 1), though no data crosses between GPUs");
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  try {
    node->release_cached();
  } catch (const std::exception& e) {
    if (!state.error_occurred()) state.SkipWithError(e.what());
  }
}

void register_colls() {
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::SendRecv})
    for (int64_t bytes = 8; bytes <= (int64_t(1) << 30); bytes *= 8)
      benchmark::RegisterBenchmark(fmt::format("BM_Nccl/{}/bytes:{}", coll_name(c), bytes).c_str(), BM_Nccl, c,
                                   bytes)
          ->Unit(benchmark::kMicrosecond)
          ->MinTime(0.05)  // of time per call: 20 times that of calls
          ->UseManualTime();
}

// "8 x NVIDIA H100 80GB HBM3", or the names one by one when they differ.
std::string gpu_names(int n) {
  std::vector<std::string> names;
  for (int d = 0; d < n; ++d) names.push_back(cuda::device_name(d));
  if (std::all_of(names.begin(), names.end(), [&](const std::string& s) { return s == names[0]; }))
    return fmt::format("{} x {}", n, names[0]);
  std::string all;
  for (const std::string& s : names) all += (all.empty() ? "" : ", ") + s;
  return all;
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_colls();
  const int n = ptdp::bench::start_cuda_suite(&argc, argv, "bench_nccl", [](int gpus) { return ptdp::gpu_names(gpus); });
  if (n < 0) return 1;
  benchmark::AddCustomContext("nccl", ptdp::nccl_version_string());
  benchmark::AddCustomContext("gpus", std::to_string(n));
  benchmark::AddCustomContext("calls_per_iteration", std::to_string(ptdp::kCallsPerIteration));
  benchmark::RunSpecifiedBenchmarks();
  ptdp::node_slot().reset();  // communicators destroyed while the CUDA runtime is still up
  benchmark::Shutdown();
  return 0;
}
