// What overlapping a collective with a GEMM costs each of them on one GPU: the CUDA backend's
// linear_forward (cuBLASLt, bf16, f32 accumulation) on its stream, and on a second stream a
// stand-in for one NCCL collective's kernel (overlap_kernel.h: `ctas` blocks, NCCL's channels,
// reduce-copying bf16 through this GPU's memory, as each step of a ring all-reduce does), launched
// first, as Megatron queues the collective before the GEMM it hides behind. Each iteration times,
// after an L2 flush, the GEMM alone, the collective alone and both together, with the GPU's global
// timer (overlap_kernel.h). Counters: each one's time alone and overlapped (us; the GEMM's from the
// common start, the collective's from its first block's start, and `coll_wait_us` before that
// start), their slowdowns, the makespan, and `hidden`: the share of the shorter one that the overlap
// hid (1 = free, 0 = serialised, below 0 worse than serialised). The collective's stream has the lowest priority or (`high`) the highest, as
// Megatron's communication streams do; `connections` records CUDA_DEVICE_MAX_CONNECTIONS.
// What it leaves out: NVLink and the peers (the stand-in reads and writes local memory only), so
// it measures the SMs and the memory bandwidth the collective takes, not its link time.
// Shapes: GPT-3 175B at t = 2, 4 and 8 with b*s = 2048 rows (the paper's b = 1, s = 2048); the
// collective moves (t-1)/t of the layer's [b*s, h] bf16 activations, a ring's share per rank. The
// GEMM shrinks with t and the collective hardly changes, so the three widths span a collective
// much shorter than its GEMM (t = 2) to one longer than it (t = 8).
//   build/bench_overlap_cuda --benchmark_filter='fc1/ctas:16'
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/model/config.h"
#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"
#include "microbench/overlap_kernel.h"

namespace ptdp {
namespace {

constexpr int64_t kRows = 2048;

// CUDA_DEVICE_MAX_CONNECTIONS: the hardware work queues that streams share (CUDA's default 8;
// Megatron sets 1 so that kernels of different streams start in the order they were queued).
int device_connections() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 8;
}

// Four global-timer stamps (ns) on the device: the collective's first block start and last block
// end, the common start (after the L2 flush) and the GEMM's end.
struct Stamps {
  uint64_t* d = nullptr;
  Stamps() { PTDP_CUDA_CHECK(cudaMalloc(&d, 4 * sizeof(uint64_t))); }
  ~Stamps() { cudaFree(d); }
  Stamps(const Stamps&) = delete;
  Stamps& operator=(const Stamps&) = delete;
};

struct Times {
  double gemm = 0, coll = 0, coll_wait = 0, both = 0;  // seconds
};

void BM_OverlapCuda(benchmark::State& state, int64_t n, int64_t k, int64_t coll_elems, int ctas, bool high_priority) {
  Backend* be = bench::backend_or_skip(state);
  if (!be) return;
  try {
    const DType dt = DType::BF16;
    Tensor x = be->empty({kRows, k}, dt), w = be->empty({n, k}, dt), y = be->empty({kRows, n}, dt);
    Tensor a = be->empty({coll_elems}, dt), b = be->empty({coll_elems}, dt), out = be->empty({coll_elems}, dt);
    bench::fill_random(*be, x, 1);
    bench::fill_random(*be, w, 2, -0.05, 0.05);
    bench::fill_random(*be, a, 3);
    bench::fill_random(*be, b, 4);
    int l2 = 0;
    PTDP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, cuda_device(*be)));
    Tensor flush = be->empty({std::max<int64_t>(2 * int64_t(l2) / 4, 1)}, DType::F32);
    const cudaStream_t gs = cuda_stream(*be);
    cudaStream_t cs = nullptr;
    int least = 0, greatest = 0;
    PTDP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    PTDP_CUDA_CHECK(cudaStreamCreateWithPriority(&cs, cudaStreamNonBlocking, high_priority ? greatest : least));
    std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> own(cs, [](cudaStream_t s) { cudaStreamDestroy(s); });
    cudaEvent_t ready = nullptr;
    PTDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    std::unique_ptr<CUevent_st, void (*)(cudaEvent_t)> own_ready(ready, [](cudaEvent_t e) { cudaEventDestroy(e); });
    Stamps stamps;

    // The flush, the common start, then the collective (queued first, on its stream) and the GEMM,
    // then the GEMM's end. No events between the two launches: with one hardware queue they
    // would order the two kernels.
    auto run = [&](bool gemm, bool coll) {
      const uint64_t reset[4] = {~uint64_t(0), 0, 0, 0};
      PTDP_CUDA_CHECK(cudaMemcpyAsync(stamps.d, reset, sizeof reset, cudaMemcpyHostToDevice, gs));
      PTDP_CUDA_CHECK(cudaMemsetAsync(flush.raw(), 0, flush.nbytes(), gs));
      bench::launch_stamp(stamps.d + 2, gs);
      PTDP_CUDA_CHECK(cudaEventRecord(ready, gs));
      PTDP_CUDA_CHECK(cudaStreamWaitEvent(cs, ready));
      if (coll) bench::launch_reduce_copy(out.raw(), a.raw(), b.raw(), coll_elems, ctas, stamps.d, cs);
      if (gemm) be->linear_forward(y, x, w, nullptr);
      bench::launch_stamp(stamps.d + 3, gs);
      PTDP_CUDA_CHECK(cudaGetLastError());
      PTDP_CUDA_CHECK(cudaStreamSynchronize(cs));
      PTDP_CUDA_CHECK(cudaStreamSynchronize(gs));
      uint64_t t[4];
      PTDP_CUDA_CHECK(cudaMemcpy(t, stamps.d, sizeof t, cudaMemcpyDeviceToHost));
      const auto sec = [](uint64_t from, uint64_t to) { return to > from ? double(to - from) / 1e9 : 0.0; };
      Times r;
      if (gemm) r.gemm = sec(t[2], t[3]);
      if (coll) {
        r.coll = sec(t[0], t[1]);
        r.coll_wait = sec(t[2], t[0]);
      }
      r.both = sec(t[2], std::max(gemm ? t[3] : 0, coll ? t[1] : 0));
      return r;
    };
    for (int i = 0; i < 3; ++i) run(true, true);  // plans, first touch, clocks
    Times alone, over;
    for (auto _ : state) {
      const Times g = run(true, false), c = run(false, true), o = run(true, true);
      alone.gemm += g.gemm;
      alone.coll += c.coll;
      over.gemm += o.gemm;
      over.coll += o.coll;
      over.coll_wait += o.coll_wait;
      over.both += o.both;
      state.SetIterationTime(o.both);
    }
    const double it = double(std::max<int64_t>(state.iterations(), 1));
    const auto us = [&](double s) { return s / it * 1e6; };
    state.counters["gemm_us"] = us(alone.gemm);
    state.counters["coll_us"] = us(alone.coll);
    state.counters["gemm_overlap_us"] = us(over.gemm);
    state.counters["coll_overlap_us"] = us(over.coll);
    state.counters["coll_wait_us"] = us(over.coll_wait);
    state.counters["makespan_us"] = us(over.both);
    state.counters["gemm_slowdown"] = alone.gemm > 0 ? over.gemm / alone.gemm : 0.0;
    state.counters["coll_slowdown"] = alone.coll > 0 ? over.coll / alone.coll : 0.0;
    const double shorter = std::min(alone.gemm, alone.coll);
    state.counters["hidden"] = shorter > 0 ? (alone.gemm + alone.coll - over.both) / shorter : 0.0;
    state.counters["gemm_TFLOP/s"] = alone.gemm > 0 ? 2.0 * kRows * n * k * it / alone.gemm / 1e12 : 0.0;
    // Bytes the collective's kernel moves: two reads and a write of every element.
    state.counters["coll_GB/s"] = alone.coll > 0 ? 3.0 * 2.0 * double(coll_elems) * it / alone.coll / 1e9 : 0.0;
    state.counters["ctas"] = ctas;
    state.counters["high_priority"] = high_priority;
    state.counters["connections"] = device_connections();
    state.counters["m"] = double(kRows);
    state.counters["n"] = double(n);
    state.counters["k"] = double(k);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  bench::release_device_cache(*be);
}

void register_overlaps() {
  const int64_t h = preset_config("gpt3-175b").hidden;
  for (int64_t tp : {8, 4, 2}) {
    // A ring's share per rank of the layer's activations, rounded to whole 16-byte vectors.
    const int64_t coll = (kRows * h * (tp - 1) / tp) / 8 * 8;
    const struct {
      const char* op;
      int64_t n, k;
    } shapes[] = {{"qkv", 3 * h / tp, h}, {"fc1", 4 * h / tp, h}, {"fc2", h, 4 * h / tp}};
    for (const auto& s : shapes)
      for (int ctas : {4, 8, 16, 32, 64})
        for (bool high : {false, true})
          benchmark::RegisterBenchmark(
              fmt::format("BM_OverlapCuda/gpt3-175b/t:{}/{}/ctas:{}/{}", tp, s.op, ctas, high ? "high" : "normal")
                  .c_str(),
              BM_OverlapCuda, s.n, s.k, coll, ctas, high)
              ->Unit(benchmark::kMicrosecond)
              ->UseManualTime();
  }
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_overlaps();
  if (ptdp::bench::start_cuda_suite(&argc, argv, "bench_overlap_cuda") < 0) return 1;
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess)
    benchmark::AddCustomContext("sms", std::to_string(sms));
  benchmark::AddCustomContext("rows", std::to_string(ptdp::kRows));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
