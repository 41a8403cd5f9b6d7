// The CUDA backend's fused kernels with the achieved bandwidth: GB/s counts the bytes each
// call must read and write. Shapes of GPT-3 175B at t = 8 on b*s = 8192 rows (b = 4,
// s = 2048): LayerNorm and the residual add over h = 12288, GeLU over 4h/t = 6144 columns,
// the causal softmax over a/t = 12 heads of s x s scores per sequence, cross-entropy over a
// vocabulary shard of 51200/8 = 6400 columns, embeddings with h = 12288, AdamW over 64 Mi f32
// parameters, and attention (its GEMMs and softmax) with TFLOP/s. bf16 and f16; each call is
// timed with CUDA events after an L2 flush. Without a GPU every benchmark is skipped.
//   build/bench_kernels_cuda --benchmark_out=results/microbench/bench_kernels_cuda.json --benchmark_out_format=json
#include <functional>
#include <string>
#include <vector>

#include "core/backend/cuda/kernels.h"
#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"

namespace ptdp {
namespace {

constexpr int64_t kRows = 8192, kHidden = 12288, kFfn = 4 * 12288 / 8, kHeads = 12, kSeq = 2048, kBatch = 4;
constexpr int64_t kHeadDim = 128, kVocab = 51200 / 8, kAdamParams = int64_t(64) << 20;

// Sets up tensors on the backend and returns the call to time and its bytes moved per call
// (or FLOPs, when `flops` is set).
struct Case {
  std::function<void()> call;
  double bytes = 0, flops = 0;
};
using Setup = std::function<Case(Backend&, DType)>;

void BM_KernelCuda(benchmark::State& state, Setup setup, DType dt) {
  Backend* be = bench::backend_or_skip(state);
  if (!be) return;
  try {
    Case c = setup(*be, dt);
    const double seconds = bench::time_on_device(state, *be, harness::Workload{.run = c.call});
    const double n = double(state.iterations());
    if (c.bytes > 0) {
      state.counters["GB/s"] = seconds > 0 ? c.bytes * n / seconds / 1e9 : 0.0;
      state.counters["MB_per_call"] = c.bytes / 1e6;
    }
    if (c.flops > 0) state.counters["TFLOP/s"] = seconds > 0 ? c.flops * n / seconds / 1e12 : 0.0;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  bench::release_device_cache(*be);
}

Tensor random(Backend& be, Shape shape, DType dt, uint64_t seed, double lo = -1, double hi = 1) {
  Tensor t = be.empty(std::move(shape), dt);
  bench::fill_random(be, t, seed, lo, hi);
  return t;
}

Tensor random_tokens(Backend& be, int64_t n, int64_t vocab, uint64_t seed) {
  Tensor h = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) h.data<int32_t>()[i] = int32_t(uniform01(seed, 1, uint64_t(i)) * double(vocab));
  Tensor t = be.empty({n}, DType::I32);
  be.copy(t, h);
  return t;
}

Case layernorm_forward(Backend& be, DType dt) {
  auto x = random(be, {kRows, kHidden}, dt, 1), g = random(be, {kHidden}, dt, 2), b = random(be, {kHidden}, dt, 3);
  auto y = be.empty({kRows, kHidden}, dt), m = be.empty({kRows}, DType::F32), r = be.empty({kRows}, DType::F32);
  const double e = double(dtype_size(dt));
  return {[=, &be]() mutable { be.layernorm_forward(y, m, r, x, g, b, 1e-5); },
          2.0 * kRows * kHidden * e + 2.0 * kHidden * e + 8.0 * kRows};
}

Case layernorm_backward(Backend& be, DType dt) {
  auto x = random(be, {kRows, kHidden}, dt, 1), g = random(be, {kHidden}, dt, 2), dy = random(be, {kRows, kHidden}, dt, 3);
  auto dx = random(be, {kRows, kHidden}, dt, 4), m = random(be, {kRows}, DType::F32, 5),
       r = random(be, {kRows}, DType::F32, 6, 0.5, 1.5);
  auto dg = be.empty({kHidden}, DType::F32), db = be.empty({kHidden}, DType::F32);
  be.fill(dg, 0.0);
  be.fill(db, 0.0);
  const double e = double(dtype_size(dt));
  // dx pass reads x, dy and dx and writes dx; the dg/db pass reads x and dy again
  return {[=, &be]() mutable { be.layernorm_backward(dx, dg, db, dy, x, g, m, r); },
          6.0 * kRows * kHidden * e + 8.0 * kRows};
}

Case gelu_forward(Backend& be, DType dt) {
  auto x = random(be, {kRows, kFfn}, dt, 1, -4, 4), y = be.empty({kRows, kFfn}, dt);
  return {[=, &be]() mutable { be.gelu_forward(y, x); }, 2.0 * kRows * kFfn * double(dtype_size(dt))};
}

Case gelu_backward(Backend& be, DType dt) {
  auto x = random(be, {kRows, kFfn}, dt, 1, -4, 4), dy = random(be, {kRows, kFfn}, dt, 2);
  auto dx = be.empty({kRows, kFfn}, dt);
  return {[=, &be]() mutable { be.gelu_backward(dx, x, dy); }, 3.0 * kRows * kFfn * double(dtype_size(dt))};
}

Case residual_add(Backend& be, DType dt) {
  auto y = random(be, {kRows, kHidden}, dt, 1), x = random(be, {kRows, kHidden}, dt, 2);
  return {[=, &be]() mutable { be.add_(y, x); }, 3.0 * kRows * kHidden * double(dtype_size(dt))};
}

Case softmax_forward(Backend& be, DType dt) {
  auto p = random(be, {kHeads, kSeq, kSeq}, dt, 1, -3, 3);
  const cudaStream_t st = cuda_stream(be);
  // in place: scores of one sequence's heads -> probabilities (re-run on its own output)
  return {[=]() { cuda::causal_softmax_forward(p.raw(), dt, kHeads * kSeq, int(kSeq), st); },
          2.0 * kHeads * kSeq * kSeq * double(dtype_size(dt))};
}

Case softmax_backward(Backend& be, DType dt) {
  auto p = random(be, {kHeads, kSeq, kSeq}, dt, 1, 0, 0.01), dp = random(be, {kHeads, kSeq, kSeq}, dt, 2);
  const cudaStream_t st = cuda_stream(be);
  return {[=]() { cuda::causal_softmax_backward(dp.raw(), p.raw(), dt, kHeads * kSeq, int(kSeq), 0.088f, st); },
          3.0 * kHeads * kSeq * kSeq * double(dtype_size(dt))};
}

Case attention_forward(Backend& be, DType dt) {
  const int64_t n = kBatch * kSeq;
  auto qkv = random(be, {n, 3 * kHeads * kHeadDim}, dt, 1);
  auto y = be.empty({n, kHeads * kHeadDim}, dt), p = be.empty({kBatch, kHeads, kSeq, kSeq}, dt);
  Case c{[=, &be]() mutable { be.attention_forward(y, p, qkv, int(kBatch), int(kSeq), int(kHeads), int(kHeadDim)); }};
  c.flops = 4.0 * kBatch * kHeads * double(kSeq) * kSeq * kHeadDim;
  return c;
}

Case attention_backward(Backend& be, DType dt) {
  const int64_t n = kBatch * kSeq;
  auto qkv = random(be, {n, 3 * kHeads * kHeadDim}, dt, 1), dy = random(be, {n, kHeads * kHeadDim}, dt, 2);
  auto y = be.empty({n, kHeads * kHeadDim}, dt), p = be.empty({kBatch, kHeads, kSeq, kSeq}, dt);
  auto dqkv = be.empty({n, 3 * kHeads * kHeadDim}, dt);
  be.attention_forward(y, p, qkv, int(kBatch), int(kSeq), int(kHeads), int(kHeadDim));
  Case c{[=, &be]() mutable {
    be.attention_backward(dqkv, dy, qkv, p, int(kBatch), int(kSeq), int(kHeads), int(kHeadDim));
  }};
  c.flops = 8.0 * kBatch * kHeads * double(kSeq) * kSeq * kHeadDim;
  return c;
}

// Block attention (flash_attention.cu) on the same sizes, causal, q_pos = k_pos = 0: TFLOP/s count
// the products over the visible (query, key) pairs only (s (s + 1) / 2 per head), 4 hd per pair
// forward, 8 hd backward (the work of the unfused path's causal half; the kernels recompute more).
double causal_pairs() { return double(kBatch) * kHeads * double(kSeq) * double(kSeq + 1) / 2; }

Case flash_forward(Backend& be, DType dt) {
  const int64_t n = kBatch * kSeq, w = kHeads * kHeadDim;
  auto q = random(be, {n, w}, dt, 1), k = random(be, {n, w}, dt, 2), v = random(be, {n, w}, dt, 3);
  auto y = be.empty({n, w}, dt), lse = be.empty({kBatch, kHeads, kSeq}, DType::F32);
  const int b = int(kBatch), s = int(kSeq), a = int(kHeads), hd = int(kHeadDim);
  Case c{[=, &be]() mutable { be.flash_attention_forward(y, lse, q, k, v, b, s, s, a, a, hd, 0, 0, true); }};
  c.flops = 4.0 * causal_pairs() * kHeadDim;
  return c;
}

Case flash_backward(Backend& be, DType dt) {
  const int64_t n = kBatch * kSeq, w = kHeads * kHeadDim;
  auto q = random(be, {n, w}, dt, 1), k = random(be, {n, w}, dt, 2), v = random(be, {n, w}, dt, 3);
  auto dy = random(be, {n, w}, dt, 4), y = be.empty({n, w}, dt), lse = be.empty({kBatch, kHeads, kSeq}, DType::F32);
  auto dq = random(be, {n, w}, dt, 5), dk = random(be, {n, w}, dt, 6), dv = random(be, {n, w}, dt, 7);
  const int b = int(kBatch), s = int(kSeq), a = int(kHeads), hd = int(kHeadDim);
  be.flash_attention_forward(y, lse, q, k, v, b, s, s, a, a, hd, 0, 0, true);
  Case c{[=, &be]() mutable {
    be.flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, a, hd, 0, 0, true);
  }};
  c.flops = 8.0 * causal_pairs() * kHeadDim;
  return c;
}

Case embedding_forward(Backend& be, DType dt) {
  auto tok = random_tokens(be, kRows, kVocab * 8, 1);
  auto wte = random(be, {kVocab, kHidden}, dt, 2), wpe = random(be, {kSeq, kHidden}, dt, 3);
  auto x = be.empty({kRows, kHidden}, dt);
  return {[=, &be]() mutable { be.embedding_forward(x, tok, wte, 0, &wpe, int(kSeq)); },
          3.0 * kRows * kHidden * double(dtype_size(dt)) + 4.0 * kRows};
}

Case embedding_backward(Backend& be, DType dt) {
  auto tok = random_tokens(be, kRows, kVocab * 8, 1);
  auto dx = random(be, {kRows, kHidden}, dt, 2);
  auto dwte = be.empty({kVocab, kHidden}, DType::F32), dwpe = be.empty({kSeq, kHidden}, DType::F32);
  be.fill(dwte, 0.0);
  be.fill(dwpe, 0.0);
  // reads dx; read-modify-writes f32 rows of dwpe (all) and dwte (the rows in this shard)
  return {[=, &be]() mutable { be.embedding_backward(dwte, &dwpe, dx, tok, 0, int(kSeq)); },
          kRows * kHidden * (double(dtype_size(dt)) + 8.0 + 8.0 / 8.0) + 4.0 * kRows};
}

Case xent_forward(Backend& be, DType dt) {
  auto logits = random(be, {kRows, kVocab}, dt, 1, -4, 4);
  auto tgt = random_tokens(be, kRows, kVocab, 2);
  auto mx = be.empty({kRows}, DType::F32), se = be.empty({kRows}, DType::F32), tl = be.empty({kRows}, DType::F32),
       loss = be.empty({kRows}, DType::F32);
  return {[=, &be]() mutable {
            be.xent_row_max(mx, logits, kVocab);
            be.xent_sum_exp(se, logits, mx, kVocab);
            be.xent_target_logit(tl, logits, tgt, 0, kVocab);
            be.xent_loss(loss, mx, se, tl);
          },
          2.0 * kRows * kVocab * double(dtype_size(dt)) + 32.0 * kRows};
}

Case xent_backward(Backend& be, DType dt) {
  auto logits = random(be, {kRows, kVocab}, dt, 1, -4, 4);
  auto tgt = random_tokens(be, kRows, kVocab, 2);
  auto mx = random(be, {kRows}, DType::F32, 3, 3, 4), se = random(be, {kRows}, DType::F32, 4, 100, 200);
  auto dl = be.empty({kRows, kVocab}, dt);
  return {[=, &be]() mutable { be.xent_backward(dl, logits, mx, se, tgt, 0, kVocab, 1.0 / kRows); },
          2.0 * kRows * kVocab * double(dtype_size(dt)) + 12.0 * kRows};
}

Case adamw(Backend& be, DType) {
  auto p = random(be, {kAdamParams}, DType::F32, 1), g = random(be, {kAdamParams}, DType::F32, 2);
  auto m = random(be, {kAdamParams}, DType::F32, 3, 0, 0.1), v = random(be, {kAdamParams}, DType::F32, 4, 0, 0.01);
  return {[=, &be]() mutable {
            be.adamw(p, g, m, v, AdamWParams{.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                             .weight_decay = 0.1, .step = 10});
          },
          28.0 * kAdamParams};
}

// The optimizer's step as AdamW::step runs it with bf16 weights and clipping: the same parameters
// in 256 segments, the gradient scaled, AdamW, the bf16 copy; one kernel per 32 segments.
Case adamw_multi(Backend& be, DType) {
  auto p = random(be, {kAdamParams}, DType::F32, 1), g = random(be, {kAdamParams}, DType::F32, 2);
  auto m = random(be, {kAdamParams}, DType::F32, 3, 0, 0.1), v = random(be, {kAdamParams}, DType::F32, 4, 0, 0.01);
  auto low = be.empty({kAdamParams}, DType::BF16);
  std::vector<AdamWSegment> segs;
  const int64_t per = kAdamParams / 256;
  for (int64_t at = 0; at < kAdamParams; at += per)
    segs.push_back({.param = at, .grad = at, .state = at, .lowp = at, .size = per, .weight_decay = 0.1});
  return {[=, &be]() mutable {
            be.adamw_multi(p, g, m, v, &low, segs,
                           AdamWParams{.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .step = 10}, 0.5);
          },
          34.0 * kAdamParams};
}

Case sum_squares(Backend& be, DType dt) {
  auto x = random(be, {kAdamParams}, dt, 1);
  // includes the copy of the result to the host and the stream synchronization
  return {[=, &be]() { benchmark::DoNotOptimize(be.sum_squares(x)); }, double(kAdamParams) * double(dtype_size(dt))};
}

void register_kernels() {
  const std::pair<const char*, Setup> cases[] = {
      {"layernorm_forward", layernorm_forward}, {"layernorm_backward", layernorm_backward},
      {"gelu_forward", gelu_forward},           {"gelu_backward", gelu_backward},
      {"residual_add", residual_add},           {"softmax_forward", softmax_forward},
      {"softmax_backward", softmax_backward},   {"attention_forward", attention_forward},
      {"attention_backward", attention_backward}, {"flash_forward", flash_forward},
      {"flash_backward", flash_backward},       {"embedding_forward", embedding_forward},
      {"embedding_backward", embedding_backward}, {"xent_forward", xent_forward},
      {"xent_backward", xent_backward},         {"sum_squares", sum_squares}};
  for (const auto& [name, setup] : cases)
    for (auto [dt, dname] : {std::pair{DType::BF16, "bf16"}, std::pair{DType::F16, "f16"}})
      benchmark::RegisterBenchmark(fmt::format("BM_KernelCuda/{}/{}", name, dname).c_str(), BM_KernelCuda, setup, dt)
          ->Unit(benchmark::kMicrosecond)
          ->UseManualTime();
  benchmark::RegisterBenchmark("BM_KernelCuda/adamw/f32", BM_KernelCuda, Setup(adamw), DType::F32)
      ->Unit(benchmark::kMicrosecond)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_KernelCuda/adamw_multi/f32", BM_KernelCuda, Setup(adamw_multi), DType::F32)
      ->Unit(benchmark::kMicrosecond)
      ->UseManualTime();
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_kernels();
  if (ptdp::bench::start_cuda_suite(&argc, argv, "bench_kernels_cuda") < 0) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
