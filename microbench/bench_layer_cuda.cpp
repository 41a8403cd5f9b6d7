// One transformer layer, forward and backward, on the CUDA backend at the paper's shapes:
// h = 2048, 4096, 8192 with a = h/128 heads (head dimension 128), s = 2048, b = 1, 2, 4, as one
// tensor-parallel rank computes it for t = 1 and 8 (a/t heads, 4h/t MLP width; the layer's
// all-reduces left out, bench_nccl measures them), no recomputation, in bf16 (f32 gradients)
// and f32. TFLOP/s counts the layer's FLOPs on this rank as bench_layer does: forward
// (24 b s h^2 + 4 b s^2 h) / t, backward twice that. Each call is timed with CUDA events after
// an L2 flush, following three warm-up passes; the backward's forward pass is queued before
// the timed interval. peak_mem_GB: the device allocator's peak (weights, gradients,
// activations). Random weights (LayerNorm gains 1, biases 0) and inputs. Without a GPU every
// benchmark is skipped with the reason.
//   build/bench_layer_cuda --benchmark_filter='BM_LayerCuda/h:4096/t:1/b:2/'
//   build/bench_layer_cuda --benchmark_out=results/microbench/bench_layer_cuda.json --benchmark_out_format=json
#include <memory>
#include <string>

#include "core/model/config.h"
#include "core/model/layer.h"
#include "core/model/params.h"
#include "microbench/bench_common.h"
#include "microbench/cuda_bench.h"

namespace ptdp {
namespace {

constexpr int kSeq = 2048, kHeadDim = 128;

// One layer's weights, gradients, input and output gradient on the device.
struct CudaLayer {
  ModelConfig cfg;
  std::unique_ptr<ParamLayout> layout;
  Tensor params, grads, x, y, dy, dx;
  LayerWeights w, g;
  LayerDims d;

  CudaLayer(Backend& be, int h, int t, int b, DType dt) {
    cfg.layers = 1;
    cfg.hidden = h;
    cfg.heads = h / kHeadDim;
    cfg.seq_length = kSeq;
    cfg.vocab_size = 51200;
    ShardSpec shard;
    shard.tp_size = t;
    shard.pre = shard.post = false;
    layout = std::make_unique<ParamLayout>(cfg, shard);
    params = be.empty({layout->total()}, dt);
    bench::fill_random(be, params, 1, -0.02, 0.02);
    w = LayerWeights::view(params, *layout, 0);
    for (Tensor* gain : {&w.ln1_w, &w.ln2_w}) be.fill(*gain, 1.0);
    for (Tensor* bias : {&w.ln1_b, &w.qkv_b, &w.proj_b, &w.ln2_b, &w.fc_b, &w.fc2_b}) be.fill(*bias, 0.0);
    grads = be.empty({layout->total()}, acc_dtype(dt));
    be.fill(grads, 0.0);
    g = LayerWeights::view(grads, *layout, 0);
    d.b = b;
    d.s = kSeq;
    d.h = h;
    d.heads = cfg.heads / t;
    d.groups = cfg.groups() / t;
    d.hd = cfg.head_dim();
    d.ffn = cfg.ffn_hidden() / t;
    d.eps = cfg.layernorm_eps;
    const int64_t n = d.rows();
    x = be.empty({n, h}, dt);
    dy = be.empty({n, h}, dt);
    bench::fill_random(be, x, 2);
    bench::fill_random(be, dy, 3, -1e-2, 1e-2);
    y = be.empty({n, h}, dt);
    dx = be.empty({n, h}, dt);
  }
  double forward_flops(int t) const {
    const double h = d.h, b = d.b, s = d.s;
    return (24.0 * b * s * h * h + 4.0 * b * s * s * h) / t;
  }
};

enum class Pass { Forward, Backward };

void BM_LayerCuda(benchmark::State& state, Pass pass, int h, int t, int b, DType dt) {
  Backend* be = bench::backend_or_skip(state);
  if (!be) return;
  try {
    CudaLayer l(*be, h, t, b, dt);
    LayerCache cache;
    auto forward = [&] { layer_forward(*be, l.d, l.w, l.x, l.y, cache, Recompute::None); };
    auto backward = [&] { layer_backward(*be, l.d, l.w, l.g, cache, l.dy, l.dx, Recompute::None); };
    for (int i = 0; i < 3; ++i) {  // GEMM plans, cached device memory
      cache = LayerCache{};
      forward();
      if (pass == Pass::Backward) backward();
    }
    be->synchronize();
    cuda::DeviceAllocator& alloc = cuda::DeviceAllocator::for_device(cuda_device(*be));
    alloc.reset_peak();
    // Each call on fresh activations (the previous pass's go back to the allocator); a backward
    // pass after its forward, outside the time.
    harness::Workload w;
    w.reset = [&] {
      cache = LayerCache{};
      if (pass == Pass::Backward) forward();
    };
    w.run = [&] {
      if (pass == Pass::Forward) forward();
      else backward();
    };
    const double seconds = bench::time_on_device(state, *be, w, 0);
    const double flops = (pass == Pass::Backward ? 2.0 : 1.0) * l.forward_flops(t);
    const double n = double(state.iterations());
    state.counters["TFLOP/s"] = seconds > 0 ? flops * n / seconds / 1e12 : 0.0;
    state.counters["tokens/s"] = seconds > 0 ? double(b) * kSeq * n / seconds : 0.0;
    state.counters["peak_mem_GB"] = double(alloc.peak_bytes_in_use()) / 1e9;
    state.counters["h"] = h;
    state.counters["heads"] = l.d.heads;
    state.counters["t"] = t;
    state.counters["b"] = b;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  bench::release_device_cache(*be);
}

void register_layers() {
  for (auto [dt, dname] : {std::pair{DType::BF16, "bf16"}, std::pair{DType::F32, "f32"}})
    for (int h : {2048, 4096, 8192})
      for (int t : {1, 8})
        for (int b : {1, 2, 4})
          for (auto [pass, pname] : {std::pair{Pass::Forward, "fwd"}, std::pair{Pass::Backward, "bwd"}})
            benchmark::RegisterBenchmark(fmt::format("BM_LayerCuda/h:{}/t:{}/b:{}/{}/{}", h, t, b, pname, dname).c_str(),
                                         BM_LayerCuda, pass, h, t, b, dt)
                ->Unit(benchmark::kMillisecond)
                ->UseManualTime();
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::register_layers();
  if (ptdp::bench::start_cuda_suite(&argc, argv, "bench_layer_cuda") < 0) return 1;
  benchmark::AddCustomContext("layer", "a = h/128, s = 2048, recompute none, no TP communication");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
