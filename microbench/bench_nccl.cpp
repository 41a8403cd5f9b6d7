// NCCL collectives over every visible GPU of this process, as nccl-tests runs them in one
// thread (-g N): one communicator per GPU made together (ncclCommInitAll), one stream per GPU
// (that GPU's CUDA backend's stream; the backend also allocates and fills the buffers), each
// call a ncclGroupStart/End over the GPUs. f32 messages of 8 B to 1 GiB by x8, out of place:
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
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/backend/cuda/device_guard.h"
#include "core/common/error.h"
#include "microbench/bench_common.h"
#include "microbench/collectives.h"
#include "microbench/cuda_bench.h"

#define PTDP_BENCH_NCCL_CHECK(call)                                                                      \
  do {                                                                                                   \
    const ncclResult_t ptdp_r_ = (call);                                                                 \
    if (ptdp_r_ != ncclSuccess)                                                                          \
      throw ::ptdp::RuntimeError(fmt::format("{} failed: {} ({}) at {}:{}", #call,                       \
                                             ncclGetErrorString(ptdp_r_), ncclGetLastError(nullptr),     \
                                             __FILE__, __LINE__));                                       \
  } while (0)

namespace ptdp {
namespace {

using bench::bus_factor;
using bench::Coll;
using bench::coll_name;

constexpr int kWarmup = 5;               // nccl-tests -w 5
constexpr int kCallsPerIteration = 20;   // nccl-tests -n 20
constexpr auto kTimeout = std::chrono::seconds(300);

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

// Every visible GPU: its CUDA backend, an event timer on the backend's stream and its NCCL
// communicator. Made once for the process; after an NCCL error it is aborted and refuses work.
class Node {
 public:
  explicit Node(int gpus) {
    for (int d = 0; d < gpus; ++d) {
      backends_.push_back(make_cuda_backend(d));
      cuda::DeviceGuard g(d);
      timers_.push_back(std::make_unique<cuda::EventTimer>(cuda_stream(*backends_.back())));
    }
    std::vector<int> devices(gpus);
    std::iota(devices.begin(), devices.end(), 0);
    comms_.assign(gpus, nullptr);
    PTDP_BENCH_NCCL_CHECK(ncclCommInitAll(comms_.data(), gpus, devices.data()));
    live_ = true;
  }
  ~Node() {  // unchecked: runs at exit
    for (auto& be : backends_) cudaStreamSynchronize(cuda_stream(*be));
    if (live_)
      for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int size() const { return int(backends_.size()); }
  Backend& backend(int i) { return *backends_[i]; }
  // Empty while usable; else why not.
  const std::string& broken() const { return broken_; }

  // Buffers for `coll` with a message of `bytes`, inputs filled (GPU i contributes i + 1;
  // broadcast's root sends 42) and outputs set to -1.
  Case make_case(Coll coll, int64_t bytes) {
    Case c;
    c.coll = coll;
    c.n = size();
    c.count = bytes / int64_t(sizeof(float));
    if (coll == Coll::AllGather || coll == Coll::ReduceScatter) {
      c.chunk = std::max<int64_t>(1, c.count / c.n);
      c.count = c.chunk * c.n;
    }
    for (int i = 0; i < c.n; ++i) {
      Backend& be = backend(i);
      const int64_t in = coll == Coll::AllGather ? c.chunk : c.count;
      const int64_t out = coll == Coll::ReduceScatter ? c.chunk : c.count;
      c.in.push_back(be.empty({in}, DType::F32));
      c.out.push_back(be.empty({out}, DType::F32));
      be.fill(c.in.back(), coll == Coll::Broadcast ? (i == 0 ? 42.0 : 0.0) : double(i + 1));
      be.fill(c.out.back(), -1.0);
    }
    return c;
  }

  // Queues `calls` grouped calls on every GPU between its two events and waits for them;
  // returns the longest GPU's time in seconds. An error aborts the node.
  double run(const Case& c, int calls) {
    PTDP_CHECK(broken_.empty(), "NCCL node unusable: {}", broken_);
    try {
      for (int i = 0; i < size(); ++i) {
        cuda::DeviceGuard g(i);
        timers_[i]->start();
      }
      for (int k = 0; k < calls; ++k) {
        PTDP_BENCH_NCCL_CHECK(ncclGroupStart());
        for (int i = 0; i < size(); ++i) launch(c, i);
        PTDP_BENCH_NCCL_CHECK(ncclGroupEnd());
      }
      for (int i = 0; i < size(); ++i) {
        cuda::DeviceGuard g(i);
        timers_[i]->stop();
      }
      wait(coll_name(c.coll));
      double longest = 0;
      for (int i = 0; i < size(); ++i) longest = std::max(longest, double(timers_[i]->elapsed_ms()) / 1e3);
      return longest;
    } catch (const std::exception& e) {
      abort_all(e.what());
      throw;
    }
  }

  // Output elements that differ from the closed-form result, over every GPU (after a run).
  int64_t count_wrong(const Case& c) {
    const int n = c.n;
    int64_t wrong = 0;
    Tensor host = Tensor::empty({c.out[0].numel()}, DType::F32);
    for (int i = 0; i < n; ++i) {
      backend(i).copy(host, c.out[i]);  // device -> host, after the NCCL work on the same stream
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

  // Waits for every GPU's work and gives the cached device memory back.
  void release() {
    if (!broken_.empty()) return;  // aborted: nothing more is queued, nothing is waited for
    for (int i = 0; i < size(); ++i) bench::release_device_cache(backend(i));
  }

 private:
  void launch(const Case& c, int i) {
    const ncclComm_t comm = comms_[i];
    const cudaStream_t st = cuda_stream(backend(i));
    const void* in = c.in[i].raw();
    void* out = c.out[i].raw();
    const size_t count = size_t(c.count), chunk = size_t(c.chunk);
    switch (c.coll) {
      case Coll::AllReduce:
        PTDP_BENCH_NCCL_CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, st));
        break;
      case Coll::AllGather: PTDP_BENCH_NCCL_CHECK(ncclAllGather(in, out, chunk, ncclFloat32, comm, st)); break;
      case Coll::ReduceScatter:
        PTDP_BENCH_NCCL_CHECK(ncclReduceScatter(in, out, chunk, ncclFloat32, ncclSum, comm, st));
        break;
      case Coll::Broadcast: PTDP_BENCH_NCCL_CHECK(ncclBroadcast(in, out, count, ncclFloat32, 0, comm, st)); break;
      case Coll::SendRecv: {
        const int n = size();
        PTDP_BENCH_NCCL_CHECK(ncclSend(in, count, ncclFloat32, (i + 1) % n, comm, st));
        PTDP_BENCH_NCCL_CHECK(ncclRecv(out, count, ncclFloat32, (i + n - 1) % n, comm, st));
        break;
      }
    }
  }

  // Polls every stream and every communicator's asynchronous error; after kTimeout throws
  // (and run() aborts the communicators) instead of hanging.
  void wait(const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
      bool done = true;
      for (int i = 0; i < size(); ++i) {
        const cudaError_t e = cudaStreamQuery(cuda_stream(backend(i)));
        if (e == cudaErrorNotReady) done = false;
        else if (e != cudaSuccess) cuda::throw_cuda_error("cudaStreamQuery(stream of GPU)", e, __FILE__, __LINE__);
      }
      for (int i = 0; i < size(); ++i) {
        ncclResult_t async = ncclSuccess;
        PTDP_BENCH_NCCL_CHECK(ncclCommGetAsyncError(comms_[i], &async));
        if (async != ncclSuccess && async != ncclInProgress)
          throw RuntimeError(fmt::format("NCCL {} on GPU {}: asynchronous error {} ({})", what, i,
                                         ncclGetErrorString(async), ncclGetLastError(comms_[i])));
      }
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw RuntimeError(fmt::format("NCCL {} on {} GPUs did not finish within {} s", what, size(),
                                       kTimeout.count()));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    const cudaError_t last = cudaGetLastError();  // a polled "not ready" is no error
    if (last != cudaSuccess && last != cudaErrorNotReady)
      cuda::throw_cuda_error("cudaGetLastError after NCCL work", last, __FILE__, __LINE__);
  }

  void abort_all(const std::string& why) {
    if (broken_.empty()) broken_ = fmt::format("aborted after an earlier error: {}", why);
    if (!live_) return;
    for (ncclComm_t c : comms_) ncclCommAbort(c);
    live_ = false;
  }

  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<cuda::EventTimer>> timers_;
  std::vector<ncclComm_t> comms_;
  bool live_ = false;
  std::string broken_;
};

std::unique_ptr<Node>& node_slot() {
  static std::unique_ptr<Node> node;
  return node;
}

// The process's node over every visible GPU, made on first use; null with `reason` when there
// is no GPU, NCCL could not start, or an earlier error aborted it.
Node* nccl_node(std::string* reason) {
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
        node_slot() = std::make_unique<Node>(gpus);
      } catch (const std::exception& e) {
        why = fmt::format("NCCL over {} GPU(s) could not start: {}", gpus, e.what());
      }
    }
  }
  Node* node = node_slot().get();
  if (node && !node->broken().empty()) {
    *reason = "NCCL " + node->broken();
    return nullptr;
  }
  if (!node) *reason = why;
  return node;
}

void BM_Nccl(benchmark::State& state, Coll coll, int64_t nominal_bytes) {
  std::string reason;
  Node* node = nccl_node(&reason);
  if (!node) {
    state.SkipWithError(reason.c_str());
    return;
  }
  try {
    const int n = node->size();
    Case c = node->make_case(coll, nominal_bytes);
    // The first run of a case checks its outputs; later runs (Google Benchmark runs a case
    // several times while it picks the iteration count) report that check.
    static std::map<std::pair<Coll, int64_t>, int64_t> checked;
    auto it = checked.find({coll, nominal_bytes});
    if (it == checked.end()) {
      node->run(c, 1);
      it = checked.emplace(std::pair{coll, nominal_bytes}, node->count_wrong(c)).first;
    }
    const int64_t wrong = it->second;
    state.counters["wrong"] = double(wrong);
    if (wrong != 0) {
      state.SkipWithError(fmt::format("{} wrong output values (counter `wrong`)", wrong).c_str());
    } else {
      for (int i = 0; i < kWarmup; ++i) node->run(c, 1);
      double seconds = 0;
      for (auto _ : state) {
        const double s = node->run(c, kCallsPerIteration) / kCallsPerIteration;
        state.SetIterationTime(s);
        seconds += s;
      }
      const double algbw = seconds > 0 ? double(c.bytes()) * double(state.iterations()) / seconds / 1e9 : 0.0;
      state.counters["algbw_GB/s"] = algbw;
      state.counters["busbw_GB/s"] = algbw * bus_factor(coll, n);
      state.counters["bytes"] = double(c.bytes());
      state.counters["count"] = double(c.count);
      state.counters["gpus"] = n;
      if (n == 1)
        state.SetLabel(bus_factor(coll, 1) == 0
                           ? "1 GPU: busbw is 0 by nccl-tests' factor (n-1)/n"
                           : "1 GPU: busbw = algbw (factor 1), though no data crosses between GPUs");
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  try {
    node->release();
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

std::string nccl_version() {
  int v = 0;
  PTDP_BENCH_NCCL_CHECK(ncclGetVersion(&v));
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_colls();
  const int n = ptdp::bench::start_cuda_suite(&argc, argv, "bench_nccl", [](int gpus) { return ptdp::gpu_names(gpus); });
  if (n < 0) return 1;
  benchmark::AddCustomContext("nccl", ptdp::nccl_version());
  benchmark::AddCustomContext("gpus", std::to_string(n));
  benchmark::AddCustomContext("calls_per_iteration", std::to_string(ptdp::kCallsPerIteration));
  benchmark::RunSpecifiedBenchmarks();
  ptdp::node_slot().reset();  // communicators destroyed while the CUDA runtime is still up
  benchmark::Shutdown();
  return 0;
}
