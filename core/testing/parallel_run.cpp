#include "core/testing/parallel_run.h"

#include <cmath>
#include <mutex>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/parallel/topology.h"
#include "core/train/stage_model.h"

namespace ptdp::testing {

std::string Layout::name() const {
  return "t" + std::to_string(tp) + "_p" + std::to_string(pp) + "_d" + std::to_string(dp) + "_v" +
         std::to_string(vpp) + "_" + schedule_name(schedule) + "_" + recompute_name(recompute) +
         (scatter_gather ? "_sg" : "_nosg");
}

RunResult train_parallel(const ModelConfig& c, const TrainConfig& tc, const Layout& layout, int iters,
                         uint64_t seed) {
  RunResult out;
  std::mutex mu;
  const Topology topo(layout.tp, layout.pp, layout.dp);
  run_local_ranks(topo.world(), [&](int rank, Communicator& world) {
    ParallelGroups g = ParallelGroups::create(world, topo);
    if (topo.world() > 1) set_cpu_threads(1);  // ranks are threads already: no nested teams
    auto be = make_cpu_backend();
    StageModel stage = build_stage_model(c, layout.tp, g.me.tp, layout.pp, g.me.pp, layout.vpp, *be, g.tp.get(), seed);
    SyntheticSamples data(c.vocab_size, c.seq_length, seed);
    TrainConfig cfg = tc;
    cfg.overlap_grad_reduce = layout.overlap;
    cfg.grad_bucket_elems = layout.bucket_elems;
    cfg.schedule = layout.schedule;
    cfg.recompute = layout.recompute;
    cfg.scatter_gather = layout.scatter_gather;
    Trainer trainer(stage.pointers(), data, cfg,
                    TrainerGroups{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get()});
    std::vector<double> losses;
    for (int i = 0; i < iters; ++i) losses.push_back(trainer.step().loss);
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) out.losses = losses;
    if (g.me.dp != 0) return;  // data-parallel replicas hold the same weights
    for (const auto& model : stage.chunks)
      for (const auto& e : model->layout().entries()) {
        if (e.shared_copy) continue;  // the first stage's copy of the tied embedding is the one
        auto& full = out.weights[e.name];
        full.resize(shape_numel(e.full_shape));
        const float* p = model->params().data<float>() + e.offset;
        for (int64_t i = 0; i < shape_numel(e.shape); ++i) full[ParamLayout::logical_index(e, i)] = p[i];
      }
  });
  return out;
}

WeightDiff compare_weights(const RunResult& ref, const RunResult& got) {
  WeightDiff d;
  double diff_all = 0, ref_all = 0;
  for (const auto& [name, w] : ref.weights) {
    auto it = got.weights.find(name);
    // The word embedding may be padded to a different size (a multiple of 128 t): its real
    // rows come first, so the common prefix is compared.
    const bool padded = name == "wte";
    if (it == got.weights.end() || (!padded && it->second.size() != w.size())) {
      d.worst_tensor = INFINITY;
      d.worst_name = name + " (missing)";
      continue;
    }
    const size_t n = std::min(w.size(), it->second.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      diff += (w[i] - it->second[i]) * (w[i] - it->second[i]);
      norm += w[i] * w[i];
    }
    diff_all += diff;
    ref_all += norm;
    double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    if (rel > d.worst_tensor) {
      d.worst_tensor = rel;
      d.worst_name = name;
    }
  }
  d.whole = std::sqrt(diff_all) / std::max(std::sqrt(ref_all), 1e-30);
  return d;
}

}  // namespace ptdp::testing
