#include "core/testing/parallel_run.h"

#include <cmath>
#include <mutex>

#include "core/backend/cpu/threads.h"
#include "core/comm/device_comm.h"
#include "core/comm/local/local_comm.h"
#include "core/testing/host_device_backend.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#endif
#ifdef PTDP_HAVE_NCCL
#include "core/backend/cuda/device_info.h"
#include "core/comm/nccl/nccl_comm.h"
#include "core/comm/nccl/nccl_sharing.h"
#endif
#include "core/parallel/topology.h"
#include "core/train/stage_model.h"

namespace ptdp::testing {

namespace {
std::string chunk_names(const std::vector<int>& chunks) {  // "_chunks1_3_3_1" (test names: [A-Za-z0-9_])
  std::string out = chunks.empty() ? "" : "_chunks";
  for (size_t i = 0; i < chunks.size(); ++i) out += (i ? "_" : "") + std::to_string(chunks[i]);
  return out;
}
}  // namespace

std::string Layout::name() const {
  return "t" + std::to_string(tp) + (cp > 1 ? "_c" + std::to_string(cp) + "_" + std::string(enum_name(cp_comm)) : "") +
         (flash ? "_flash" : "") + "_p" + std::to_string(pp) + "_d" + std::to_string(dp) + "_v" +
         std::to_string(vpp) + (first ? "_first" + std::to_string(first) : "") +
         (last ? "_last" + std::to_string(last) : "") + (embedding ? "_embsplit" : "") + (loss ? "_losssplit" : "") +
         chunk_names(chunks) +
         "_" + std::string(enum_name(schedule)) + "_" + std::string(enum_name(recompute)) +
         (recompute_act ? "_ract" : "") + (scatter_gather ? "_sg" : "_nosg") + (sequence_parallel ? "_sp" : "") + (zero ? "_zero" + std::to_string(zero) : "") +
         (overlap ? "_overlap" : "") + (dtype == DType::F32 ? "" : "_" + std::string(dtype_name(dtype))) +
         (backend == "cpu" ? "" : backend == "host-device" ? "_hostdevice" : "_" + backend) +
         (comm == "local" ? "" : "_" + comm);
}

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name(); }

TrainConfig equivalence_train_config(int micro_batch, int global_batch) {
  TrainConfig tc;
  tc.micro_batch = micro_batch;
  tc.global_batch = global_batch;
  tc.optimizer.lr.max_lr = 1e-3;
  return tc;
}

std::unique_ptr<Backend> make_test_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "host-device") return make_host_device_backend();
#ifdef PTDP_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend(0);
#endif
  throw RuntimeError("no test backend named " + name);
}

bool nccl_ranks_fit(int ranks, int gpus, std::string* why) {
  if (gpus >= ranks) return true;
  std::string reason = "no GPU here";
  if (gpus > 0) {
#ifdef PTDP_HAVE_NCCL
    if (nccl_ranks_share_gpus(&reason)) return true;
#else
    reason = "this build has no NCCL";
#endif
  }
  *why = std::to_string(ranks) + " ranks on " + std::to_string(gpus) + " GPU(s): " + reason;
  return false;
}

RunResult train_on_world(Communicator& world, const ModelConfig& c, const TrainConfig& tc, const Layout& layout,
                         int iters, uint64_t seed) {
  const Topology topo(layout.tp, layout.pp, layout.dp, layout.cp);
  if (topo.world() > 1) set_cpu_threads(1);  // ranks are threads or processes already
  std::unique_ptr<Backend> be;
  std::unique_ptr<Communicator> nccl, staged;  // device tensors go through the host communicator, or NCCL
  if (layout.comm == "nccl") {
#ifdef PTDP_HAVE_NCCL
    PTDP_CHECK(layout.backend == "cuda", "layout {}: nccl needs the cuda backend", layout.name());
    const int device = nccl_rank_gpu(world.rank(), cuda::device_count());
    be = make_cuda_backend(device);
    nccl = make_nccl_world(world, device, world.timeout(), be.get());
    staged = make_device_comm(*nccl, *be, Device::CUDA);
#else
    throw RuntimeError("layout " + layout.name() + ": this build has no NCCL");
#endif
  } else {
    be = make_test_backend(layout.backend);
    if (be->device() != Device::CPU) staged = make_device_comm(world, *be, Device::CPU);
  }
  ParallelGroups g = ParallelGroups::create(staged ? *staged : world, topo);
  StageModel stage =
      build_stage_model(c, layout.tp, g.me.tp, g.me.pp,
                        LayerSplit{c.layers, layout.pp, layout.vpp, layout.first, layout.last, layout.embedding,
                                   layout.loss, layout.chunks},
                        *be, g.tp.get(), seed, layout.dtype, layout.sequence_parallel);
  ContextParallel cp;
  cp.group = g.cp.get();
  cp.size = layout.cp;
  cp.rank = g.me.cp;
  cp.comm = layout.cp_comm;
  for (Gpt* chunk : stage.pointers()) {
    chunk->set_attention(layout.flash || layout.cp > 1, cp);
    chunk->set_recompute_activation(layout.recompute_act);
  }
  SyntheticSamples data(c.vocab_size, c.seq_length, seed);
  TrainConfig cfg = tc;
  cfg.overlap_grad_reduce = layout.overlap;
  cfg.grad_bucket_elems = layout.bucket_elems;
  cfg.schedule = layout.schedule;
  cfg.recompute = layout.recompute;
  cfg.scatter_gather = layout.scatter_gather;
  cfg.zero = layout.zero;
  TrainerGroups tg{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get()};
  tg.cp = g.cp.get();
  tg.dp_cp = g.dp_cp.get();
  Trainer trainer(stage.pointers(), data, cfg, tg);
  RunResult out;
  for (int i = 0; i < iters; ++i) {
    const IterStats st = trainer.step();
    out.losses.push_back(st.loss);
    out.peak_activation_bytes = std::max(out.peak_activation_bytes, st.peak_activation_bytes);
  }
  out.eval_loss = trainer.evaluate(data, int64_t(iters) * cfg.global_batch, 1);
  // Assemble the logical weights on every rank: each element is contributed once, by the
  // first data-parallel replica's tensor-parallel rank that holds it (tp rank 0 for
  // replicated tensors), from the first stage for the tied embedding.
  std::vector<Tensor> masters;  // host copies of the f32 master weights
  for (size_t j = 0; j < stage.chunks.size(); ++j) masters.push_back(trainer.full_master(int(j)));
  std::map<std::string, std::pair<const ParamEntry*, const float*>> mine;  // entry, master weights
  for (size_t j = 0; j < stage.chunks.size(); ++j)
    for (const auto& e : stage.chunks[j]->layout().entries())
      if (!e.shared_copy) mine[e.name] = {&e, masters[j].data<float>()};
  ParamLayout full_layout(c, ShardSpec{});
  for (const auto& fe : full_layout.entries()) {
    const int64_t n = has_vocab_rows(fe.name) ? c.padded_vocab(layout.tp) * c.hidden : shape_numel(fe.full_shape);
    Tensor full = Tensor::zeros({n}, DType::F64);
    auto it = mine.find(fe.name);
    if (it != mine.end() && g.me.dp == 0 && g.me.cp == 0) {
      const ParamEntry& e = *it->second.first;
      if (g.me.tp == 0 || e.split_dim >= 0) {
        const float* p = it->second.second + e.offset;
        for (int64_t i = 0; i < shape_numel(e.shape); ++i) full.data<double>()[ParamLayout::logical_index(e, i)] = p[i];
      }
    }
    world.all_reduce(full, ReduceOp::Sum);
    out.weights[fe.name].assign(full.data<double>(), full.data<double>() + n);
  }
  return out;
}

RunResult train_parallel(const ModelConfig& c, const TrainConfig& tc, const Layout& layout, int iters,
                         uint64_t seed) {
  RunResult out;
  std::mutex mu;
  const Topology topo(layout.tp, layout.pp, layout.dp, layout.cp);
  run_local_ranks(topo.world(), [&](int rank, Communicator& world) {
    RunResult r = train_on_world(world, c, tc, layout, iters, seed);
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) out = std::move(r);
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
    const bool padded = has_vocab_rows(name);
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
