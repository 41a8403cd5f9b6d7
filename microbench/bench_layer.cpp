// One transformer layer of gpt-1.7b (h = 2304, a = 24), forward and backward, as one
// tensor-parallel rank computes it for t = 1, 2, 4, 8 (a/t heads, 4h/t MLP width). The layer's
// tensor-parallel all-reduces are left out (bench_comm measures them). b = 1, s = 512 rows, no
// recomputation. GFLOP/s counts the layer's FLOPs on this rank: forward (24 b s h^2 + 4 b s^2 h) / t,
// backward twice that, as the paper's Eq. (3) counts a layer.
//   build/bench_layer --benchmark_out=results/microbench/bench_layer.json --benchmark_out_format=json
#include "core/backend/backend.h"
#include "core/model/config.h"
#include "core/model/layer.h"
#include "core/model/params.h"
#include "microbench/bench_common.h"

namespace ptdp {
namespace {

constexpr int kB = 1, kS = 512;

struct OneLayer {
  std::unique_ptr<Backend> be = make_cpu_backend();
  ModelConfig cfg;
  ShardSpec shard;
  std::unique_ptr<ParamLayout> layout;
  Tensor params, grads, x, y, dy, dx;
  LayerWeights w, g;
  LayerDims d;

  explicit OneLayer(int t) {
    cfg = preset_config("gpt-1.7b");
    cfg.layers = 1;
    shard.tp_size = t;
    shard.pre = shard.post = false;
    layout = std::make_unique<ParamLayout>(cfg, shard);
    params = be->empty({layout->total()}, DType::F32);
    init_params(*layout, params, 1234);
    grads = be->empty({layout->total()}, DType::F32);
    be->fill(grads, 0.0);
    w = LayerWeights::view(params, *layout, 0);
    g = LayerWeights::view(grads, *layout, 0);
    d.b = kB;
    d.s = kS;
    d.h = cfg.hidden;
    d.heads = cfg.heads / t;
    d.groups = cfg.groups() / t;
    d.hd = cfg.head_dim();
    d.ffn = cfg.ffn_hidden() / t;
    d.eps = cfg.layernorm_eps;
    const int64_t n = d.rows();
    x = be->empty({n, d.h}, DType::F32);
    dy = be->empty({n, d.h}, DType::F32);
    float* px = x.data<float>();
    float* pdy = dy.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      px[i] = float((i * 7919) % 1000) * 1e-3f - 0.5f;
      pdy[i] = float((i * 104729) % 1000) * 1e-6f;
    }
    y = be->empty({n, d.h}, DType::F32);
    dx = be->empty({n, d.h}, DType::F32);
  }
  double forward_flops(int t) const {
    const double h = d.h, rows = d.rows();
    return (24.0 * rows * h * h + 4.0 * kB * double(kS) * kS * h) / t;
  }
};

void BM_LayerForward(benchmark::State& state) {
  const int t = int(state.range(0));
  OneLayer l(t);
  LayerCache cache;
  const double seconds =
      bench::time_iterations(state, [&] { layer_forward(*l.be, l.d, l.w, l.x, l.y, cache, Recompute::None); });
  bench::set_rate(state, "GFLOP/s", l.forward_flops(t) / 1e9, seconds);
  bench::set_rate(state, "tokens/s", double(kB) * kS, seconds);
}
BENCHMARK(BM_LayerForward)->ArgName("t")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

// Backward only: the forward pass that fills the cache is each call's reset, outside the time
// (the benchmark's timer paused).
void BM_LayerBackward(benchmark::State& state) {
  const int t = int(state.range(0));
  OneLayer l(t);
  LayerCache cache;
  harness::Workload w;
  w.reset = [&] { layer_forward(*l.be, l.d, l.w, l.x, l.y, cache, Recompute::None); };
  w.run = [&] { layer_backward(*l.be, l.d, l.w, l.g, cache, l.dy, l.dx, Recompute::None); };
  const double seconds = bench::time_iterations(state, w, harness::host_clock());
  bench::set_rate(state, "GFLOP/s", 2.0 * l.forward_flops(t) / 1e9, seconds);
  bench::set_rate(state, "tokens/s", double(kB) * kS, seconds);
}
BENCHMARK(BM_LayerBackward)->ArgName("t")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  return ptdp::bench::bench_main(argc, argv, "bench_layer", [] {
    benchmark::AddCustomContext("layer", "gpt-1.7b: h=2304 a=24, b=1 s=512, recompute none, no TP communication");
  });
}
