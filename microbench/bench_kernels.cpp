// The CPU backend's non-GEMM kernels (LayerNorm, GeLU, attention with its softmax,
// cross-entropy, AdamW, residual add) through the Backend interface, with the achieved
// bandwidth: GB/s counts the bytes each call must read and write (f32), and pct_of_triad
// compares it with the STREAM triad bandwidth measured by this suite (BM_StreamTriad; the
// reference measured before the run is in the JSON context as triad_gbs). Shapes: gpt-1.7b
// (h = 2304, a = 24) at b*s = 4096 rows for the element-wise kernels, so that every tensor is
// larger than the 32 MiB L3 of our CPU; attention b = 1, s = 1024; cross-entropy 512 rows x
// V = 51200; AdamW over 16 Mi parameters.
//   build/bench_kernels --benchmark_out=results/microbench/bench_kernels.json --benchmark_out_format=json
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/harness/cpu_workloads.h"
#include "microbench/bench_common.h"

namespace ptdp {
namespace {

constexpr int64_t kRows = 4096, kHidden = 2304, kHeads = 24;
constexpr int64_t kStreamElems = int64_t(32) << 20;  // 128 MiB of f32 per array: 4x the L3

double g_triad_bytes_per_s = 0;  // the reference, measured in main before the run

// Bytes per iteration as GB/s, and as a percentage of the triad reference.
void set_bandwidth(benchmark::State& state, double bytes, double seconds) {
  bench::set_rate(state, "GB/s", bytes / 1e9, seconds);
  if (g_triad_bytes_per_s > 0) bench::set_rate(state, "pct_of_triad", 100.0 * bytes / g_triad_bytes_per_s, seconds);
  state.counters["MB_per_call"] = bytes / 1e6;
}

// STREAM counts the bytes the kernel names: copy 2 arrays, triad 3 (no write-allocate traffic);
// the kernels are `ptdp accept`'s (core/harness/cpu_workloads.h), the triad's first pass checked.
void stream(benchmark::State& state, const harness::Workload& w) {
  harness::prepare(w, harness::host_clock(), 0);
  set_bandwidth(state, w.work, bench::time_iterations(state, w, harness::host_clock()));
}

void BM_StreamCopy(benchmark::State& state) { stream(state, harness::stream_copy(kStreamElems)); }
BENCHMARK(BM_StreamCopy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamTriad(benchmark::State& state) { stream(state, harness::stream_triad(kStreamElems)); }
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime();

Tensor filled(Backend& be, Shape shape, double v) {
  Tensor t = be.empty(std::move(shape), DType::F32);
  be.fill(t, v);
  return t;
}

Tensor ramp(Backend& be, Shape shape) {
  Tensor t = be.empty(std::move(shape), DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float((i * 7919) % 1000) * 1e-3f - 0.5f;
  return t;
}

void BM_LayerNormForward(benchmark::State& state) {
  auto be = make_cpu_backend();
  Tensor x = ramp(*be, {kRows, kHidden}), y = be->empty({kRows, kHidden}, DType::F32);
  Tensor mean = be->empty({kRows}, DType::F32), rstd = be->empty({kRows}, DType::F32);
  Tensor g = filled(*be, {kHidden}, 1.0), b = filled(*be, {kHidden}, 0.0);
  const double seconds = bench::time_iterations(state, [&] { be->layernorm_forward(y, mean, rstd, x, g, b, 1e-5); });
  set_bandwidth(state, 4.0 * (2 * kRows * kHidden + 2 * kHidden + 2 * kRows), seconds);  // x in, y out
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNormBackward(benchmark::State& state) {
  auto be = make_cpu_backend();
  Tensor x = ramp(*be, {kRows, kHidden}), y = be->empty({kRows, kHidden}, DType::F32);
  Tensor mean = be->empty({kRows}, DType::F32), rstd = be->empty({kRows}, DType::F32);
  Tensor g = filled(*be, {kHidden}, 1.0), b = filled(*be, {kHidden}, 0.0);
  be->layernorm_forward(y, mean, rstd, x, g, b, 1e-5);
  Tensor dy = ramp(*be, {kRows, kHidden}), dx = filled(*be, {kRows, kHidden}, 0.0);
  Tensor dg = filled(*be, {kHidden}, 0.0), db = filled(*be, {kHidden}, 0.0);
  const double seconds =
      bench::time_iterations(state, [&] { be->layernorm_backward(dx, dg, db, dy, x, g, mean, rstd); });
  set_bandwidth(state, 4.0 * (4 * kRows * kHidden), seconds);  // dy, x in; dx read and written
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GeluForward(benchmark::State& state) {
  auto be = make_cpu_backend();
  Tensor x = ramp(*be, {kRows, 4 * kHidden}), y = be->empty({kRows, 4 * kHidden}, DType::F32);
  const double seconds = bench::time_iterations(state, [&] { be->gelu_forward(y, x); });
  set_bandwidth(state, 4.0 * 2 * x.numel(), seconds);
}
BENCHMARK(BM_GeluForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GeluBackward(benchmark::State& state) {
  auto be = make_cpu_backend();
  Tensor x = ramp(*be, {kRows, 4 * kHidden}), dy = ramp(*be, {kRows, 4 * kHidden});
  Tensor dx = be->empty({kRows, 4 * kHidden}, DType::F32);
  const double seconds = bench::time_iterations(state, [&] { be->gelu_backward(dx, x, dy); });
  set_bandwidth(state, 4.0 * 3 * x.numel(), seconds);
}
BENCHMARK(BM_GeluBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ResidualAdd(benchmark::State& state) {
  auto be = make_cpu_backend();
  Tensor y = ramp(*be, {kRows, kHidden}), x = ramp(*be, {kRows, kHidden});
  const double seconds = bench::time_iterations(state, [&] { be->add_(y, x); });
  set_bandwidth(state, 4.0 * 3 * x.numel(), seconds);
}
BENCHMARK(BM_ResidualAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

// Attention core (QK^T, causal softmax, PV per (batch, head)): GFLOP/s of the two GEMMs as dense
// (4 b a s^2 hd forward, 8 backward), GB/s of qkv in, probabilities and output out.
constexpr int kAttnB = 1, kAttnS = 1024, kAttnHd = kHidden / kHeads;

void BM_AttentionForward(benchmark::State& state) {
  auto be = make_cpu_backend();
  const int64_t n = int64_t(kAttnB) * kAttnS;
  Tensor qkv = ramp(*be, {n, 3 * kHeads * kAttnHd}), y = be->empty({n, kHeads * kAttnHd}, DType::F32);
  Tensor probs = be->empty({kAttnB, kHeads, kAttnS, kAttnS}, DType::F32);
  const double seconds = bench::time_iterations(
      state, [&] { be->attention_forward(y, probs, qkv, kAttnB, kAttnS, int(kHeads), kAttnHd); });
  const double flops = 4.0 * kAttnB * kHeads * double(kAttnS) * kAttnS * kAttnHd;
  bench::set_rate(state, "GFLOP/s", flops / 1e9, seconds);
  set_bandwidth(state, 4.0 * (qkv.numel() + probs.numel() + y.numel()), seconds);
}
BENCHMARK(BM_AttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AttentionBackward(benchmark::State& state) {
  auto be = make_cpu_backend();
  const int64_t n = int64_t(kAttnB) * kAttnS;
  Tensor qkv = ramp(*be, {n, 3 * kHeads * kAttnHd}), y = be->empty({n, kHeads * kAttnHd}, DType::F32);
  Tensor probs = be->empty({kAttnB, kHeads, kAttnS, kAttnS}, DType::F32);
  be->attention_forward(y, probs, qkv, kAttnB, kAttnS, int(kHeads), kAttnHd);
  Tensor dy = ramp(*be, {n, kHeads * kAttnHd}), dqkv = be->empty({n, 3 * kHeads * kAttnHd}, DType::F32);
  const double seconds = bench::time_iterations(
      state, [&] { be->attention_backward(dqkv, dy, qkv, probs, kAttnB, kAttnS, int(kHeads), kAttnHd); });
  const double flops = 8.0 * kAttnB * kHeads * double(kAttnS) * kAttnS * kAttnHd;
  bench::set_rate(state, "GFLOP/s", flops / 1e9, seconds);
  set_bandwidth(state, 4.0 * (qkv.numel() + probs.numel() + dy.numel() + dqkv.numel()), seconds);
}
BENCHMARK(BM_AttentionBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// Cross-entropy over the vocabulary: forward = row max, sum of exponentials (two passes over the
// logits), target logit and loss; backward = one pass reading the logits and writing dlogits.
constexpr int64_t kXentRows = 512, kVocab = 51200;

struct Xent {
  std::unique_ptr<Backend> be = make_cpu_backend();
  Tensor logits = ramp(*be, {kXentRows, kVocab});
  Tensor targets = Tensor::empty({kXentRows}, DType::I32);
  Tensor max = be->empty({kXentRows}, DType::F32), se = be->empty({kXentRows}, DType::F32);
  Tensor tgt = be->empty({kXentRows}, DType::F32), loss = be->empty({kXentRows}, DType::F32);
  Xent() {
    for (int64_t i = 0; i < kXentRows; ++i) targets.data<int32_t>()[i] = int32_t((i * 131) % kVocab);
  }
  void forward() {
    be->xent_row_max(max, logits, kVocab);
    be->xent_sum_exp(se, logits, max, kVocab);
    be->xent_target_logit(tgt, logits, targets, 0, kVocab);
    be->xent_loss(loss, max, se, tgt);
  }
};

void BM_CrossEntropyForward(benchmark::State& state) {
  Xent x;
  const double seconds = bench::time_iterations(state, [&] { x.forward(); });
  set_bandwidth(state, 4.0 * 2 * x.logits.numel(), seconds);
}
BENCHMARK(BM_CrossEntropyForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CrossEntropyBackward(benchmark::State& state) {
  Xent x;
  x.forward();
  Tensor dlogits = x.be->empty({kXentRows, kVocab}, DType::F32);
  const double seconds = bench::time_iterations(state, [&] {
    x.be->xent_backward(dlogits, x.logits, x.max, x.se, x.targets, 0, kVocab, 1.0 / kXentRows);
  });
  set_bandwidth(state, 4.0 * 2 * x.logits.numel(), seconds);
}
BENCHMARK(BM_CrossEntropyBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// AdamW: reads param, grad, m, v and writes param, m, v (7 f32 arrays per step).
void BM_AdamW(benchmark::State& state) {
  constexpr int64_t kParams = int64_t(16) << 20;
  auto be = make_cpu_backend();
  Tensor p = ramp(*be, {kParams}), g = ramp(*be, {kParams});
  Tensor m = filled(*be, {kParams}, 0.0), v = filled(*be, {kParams}, 0.0);
  AdamWParams ap;
  ap.lr = 1e-4;
  ap.weight_decay = 0.01;
  const double seconds = bench::time_iterations(state, [&] {
    be->adamw(p, g, m, v, ap);
    ++ap.step;
  });
  set_bandwidth(state, 4.0 * 7 * kParams, seconds);
}
BENCHMARK(BM_AdamW)->Unit(benchmark::kMillisecond)->UseRealTime();

// The reference for pct_of_triad: best of 10 triad passes after one untimed (checked) pass, in bytes/s.
double measure_triad() {
  harness::Workload w = harness::stream_triad(kStreamElems);
  w.unit = 1;
  return harness::measure(w, harness::host_clock(), 0, 10).samples.best();
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  return ptdp::bench::bench_main(argc, argv, "bench_kernels", [] {
    ptdp::g_triad_bytes_per_s = ptdp::measure_triad();
    benchmark::AddCustomContext("triad_gbs", fmt::format("{:.2f}", ptdp::g_triad_bytes_per_s / 1e9));
  });
}
