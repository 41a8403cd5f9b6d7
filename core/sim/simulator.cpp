#include "core/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/common/error.h"
#include "core/parallel/schedule.h"
#include "core/accounting/flops.h"
#include "core/sim/deepspeed_schedule.h"
#include "core/sim/replay.h"
#include "core/sim/zero3.h"

namespace ptdp::sim {

namespace {

// The durations of every (stage, chunk) for the replay.
ReplayInput replay_input(const RunConfig& cfg, const CostModel& cm) {
  const ParallelConfig& par = cfg.par;
  const int p = par.pp, v = par.vpp;
  ReplayInput in;
  in.kind = par.schedule;
  in.p = p;
  in.m = par.num_microbatches();
  in.v = v;
  const LayerSplit split = par.layer_split(cfg.model.layers);
  const bool sync = cm.opt.p2p_sync;
  // DeepSpeed's engine: its own schedule of blocking transfers (deepspeed_schedule.h).
  const bool ds = cm.stack.deepspeed_engine;
  if (ds) {
    in.rendezvous = true;
    for (int s = 0; s < p; ++s) in.actions.push_back(deepspeed_train_schedule(p, in.m, s));
  }
  in.costs.resize(size_t(p) * v);
  for (int s = 0; s < p; ++s) {
    for (int j = 0; j < v; ++j) {
      ChunkCosts& c = in.costs[size_t(s) * v + j];
      const double lc = chunk_layers(split, s, j).size();  // this chunk's layers
      c.forward = lc * cm.layer.forward.total();
      c.backward = lc * (cm.layer.recompute.total() + cm.layer.backward.total());
      if (s == 0 && j == 0) {
        c.forward += cm.edges.embed_forward.total();
        c.backward += cm.edges.embed_backward.total();
      }
      if (s == p - 1 && j == v - 1) {
        c.forward += cm.edges.head_forward.total();
        c.backward += cm.edges.head_backward.total();
      }
      const Peer next = forward_peer(p, s, j), prev = backward_peer(p, s, j);
      const double to_next = cm.cross_node(s, next.stage) ? cm.send_cross : cm.send_local;
      const double to_prev = cm.cross_node(s, prev.stage) ? cm.send_cross : cm.send_local;
      c.send_fwd_arrive = to_next;
      c.send_fwd_busy = sync ? to_next : 0.0;
      c.send_bwd_arrive = to_prev;
      c.send_bwd_busy = sync ? to_prev : 0.0;
      c.recv_fwd_after = cm.gather;
      c.recv_bwd_after = cm.gather;
      if (ds) {
        // Each partitioned tensor's meta message goes first; the receiver syncs with the host to
        // read it (.tolist()) before its all-gather. The forward's ThroughputTimer syncs too. The
        // backward gathers twice: the gradient and the stage's own output, freed once it was sent.
        c.send_fwd_arrive += cm.cross_node(s, next.stage) ? cm.meta_cross : cm.meta_local;
        c.send_bwd_arrive += cm.cross_node(s, prev.stage) ? cm.meta_cross : cm.meta_local;
        if (cm.gather > 0) {
          c.recv_fwd_after += cm.host_sync;
          c.recv_bwd_after = 2 * (cm.gather + cm.host_sync);
        }
        c.forward += cm.host_sync;
      }
    }
  }
  return in;
}

}  // namespace

double iteration_lower_bound(const RunConfig& cfg, const CostModel& cm) {
  const double m = cfg.par.num_microbatches();
  // The stage with the most layers bounds the pipeline.
  const LayerSplit split = cfg.par.layer_split(cfg.model.layers);
  int most = 0;
  for (int s = 0; s < cfg.par.pp; ++s) most = std::max(most, stage_layer_count(split, s));
  return m * most * (cm.layer.forward.total() + cm.layer.recompute.total() + cm.layer.backward.total());
}

namespace {

// Parameter tensors of one layer as Megatron holds them: one weight a module (LLaMA's gate and up
// are one [2f, h] linear_fc1), and the biases and norms: gpt 12, llama 6.
int megatron_tensors_per_layer(const ModelTensors& m) {
  int n = kLayerModules;
  for (const ModelTensor& x : m.layer) n += x.small() ? 1 : 0;
  return n;
}

// Throughput columns from the iteration time.
void fill_throughput(SimResult& r, const RunConfig& cfg, double peak) {
  const ParallelConfig& par = cfg.par;
  const double gpus = double(par.tp) * par.pp * par.cp * par.dp;
  const double B = par.global_batch;
  r.tflops_per_gpu = flops_eq3(cfg.model, par.global_batch) / r.iter_time_s / gpus / 1e12;
  r.model_tflops_per_gpu = flops_model(cfg.model, par.global_batch) / r.iter_time_s / gpus / 1e12;
  r.pct_peak = 100.0 * r.tflops_per_gpu * 1e12 / peak;
  r.seq_per_s = B / r.iter_time_s;
  r.tokens_per_s = B * cfg.model.seq_length / r.iter_time_s;
}

// --zero 3: DeepSpeed's engine replayed module by module (zero3.h), then the optimizer step on
// each rank's 1/d of the parameters and the overflow and gradient-norm all-reduces.
SimResult simulate_zero3(const RunConfig& cfg, const HardwareProfile& hw, const SimOptions& opt) {
  const CostModel cm(cfg, hw, opt);
  const ParallelConfig& par = cfg.par;
  SimResult r;
  r.layer = cm.layer;
  const Zero3Timeline z = replay_zero3(cfg, cm);
  r.memory = memory_verdict(cfg, hw, {}, opt.zero3);
  r.pipeline_time_s = z.end_s;
  r.bubble_fraction = 0;
  const double params = r.memory.stages[0].params;
  const int per_node = std::min(par.dp, hw.gpus_per_node);
  const double sync = 2 * cm.net.allreduce(4, par.dp, per_node);  // found-inf and gradient norm
  r.optimizer_s = cm.optimizer_step(params / par.dp);
  r.iter_time_s = z.end_s + r.optimizer_s + sync;
  r.post_time_s = r.iter_time_s - r.pipeline_time_s;
  r.dp_allreduce_s = z.exposed_comm_s;
  r.zero3 = z;
  r.stage0.forward_s = z.forward_s;
  r.stage0.backward_s = z.backward_s;
  r.stage0.dp_s = z.exposed_comm_s + sync;
  r.stage0.optimizer_s = r.optimizer_s;
  r.activation_bytes = r.memory.stages[0].activations;
  fill_throughput(r, cfg, cm.peak);
  return r;
}

// Every time, rate and size of a result is finite (the profile's bounds, hardware.h, keep them
// so): a profile that still makes one overflow is named, never written as inf or nan in a row.
const SimResult& require_finite(const SimResult& r, const HardwareProfile& hw) {
  const std::pair<const char*, double> values[] = {
      {"iteration time", r.iter_time_s},      {"pipeline time", r.pipeline_time_s},
      {"bubble fraction", r.bubble_fraction}, {"TFLOP/s per GPU", r.tflops_per_gpu},
      {"tokens per second", r.tokens_per_s},  {"peak memory", r.memory.peak}};
  for (const auto& [what, v] : values)
    if (!std::isfinite(v))
      usage_error("{}: the simulated {} is {} with this profile's numbers (a rate too small or a latency too "
                  "large for this model); check the profile's values",
                  hw.path, what, v);
  return r;
}

}  // namespace

SimResult simulate(const RunConfig& cfg, const HardwareProfile& hw, const SimOptions& opt) {
  if (int64_t(cfg.par.num_microbatches()) * cfg.par.vpp > kMaxSimMicrobatches)
    usage_error("--global-batch {}: {} micro-batches per pipeline (B / (b x d)) x v = {}; the simulator replays at "
                "most {} per iteration",
                cfg.par.global_batch, cfg.par.num_microbatches(),
                int64_t(cfg.par.num_microbatches()) * cfg.par.vpp, kMaxSimMicrobatches);
  if (cfg.par.zero == 3) {
    if (cfg.model.arch == Arch::Llama)
      usage_error("--zero 3: DeepSpeed's ZeRO-3 replay models GPT's modules only, not --arch llama");
    return require_finite(simulate_zero3(cfg, hw, opt), hw);
  }
  const CostModel cm(cfg, hw, opt);
  const ParallelConfig& par = cfg.par;
  SimResult r;
  r.layer = cm.layer;
  const ReplayResult rep = replay(replay_input(cfg, cm));
  PTDP_CHECK(!rep.deadlock, "schedule {} deadlocked: {}", par.schedule, rep.deadlock_detail);
  std::vector<int> in_flight;
  for (const auto& st : rep.stages) in_flight.push_back(st.peak_in_flight);
  r.memory = memory_verdict(cfg, hw, in_flight, opt.zero3);
  r.pipeline_time_s = rep.makespan;
  r.bubble_fraction = bubble_fraction(rep);

  // After the pipeline flush, every stage all-reduces its gradients over the data-parallel group
  // (the first and last stage also the tied embedding), then steps the optimizer; the grad-norm
  // and inf checks make every stage wait for the slowest.
  const bool overlap = opt.dp_overlap || cfg.overlap_grad_reduce || cm.stack.dp_overlap;
  const LayerSplit split = par.layer_split(cfg.model.layers);
  double end = 0;
  for (int s = 0; s < par.pp; ++s) {
    const double chunk_backward = double(stage_layer_count(split, s)) / par.vpp *
                                  (cm.layer.recompute.total() + cm.layer.backward.total());
    const StageTimeline& st = rep.stages[s];
    const double params = r.memory.stages[s].params;
    // --zero 1: the gradients are reduce-scattered (half an all-reduce's traffic), each rank steps
    // its 1/d of the parameters, then the updated ones are all-gathered (after the step: Megatron's
    // distributed optimizer as of its introduction, no overlap of the gather with the next forward).
    // --zero 2 (stack mcore only: stack_refusal): the same step and gather, but every backward's
    // gradients are reduce-scattered into the rank's shard, not only the last micro-batch's.
    const bool sharded = par.zero == 1 || par.zero == 2;
    const double dp = cm.dp_reduction(params);
    double t = st.finish;
    if (par.zero == 2 || overlap) {
      // Gradients are reduced bucket by bucket from the start of the backward that completes them,
      // one chunk's after another on one communication stream, in the order they are ready: every
      // (micro-batch, chunk) backward's under --zero 2, else each chunk's last (the only one that
      // synchronises; the interleaved schedule's cool-down runs them from the last chunk to the first).
      std::vector<double> ready;
      for (double end : par.zero == 2 ? st.backward_ends : st.last_backward_end) ready.push_back(end - chunk_backward);
      std::sort(ready.begin(), ready.end());
      double comm_end = 0;
      for (double from : ready) comm_end = std::max(comm_end, from) + dp / par.vpp;
      t = std::max(t, comm_end);
    } else {
      t += dp;
    }
    const double reduce_exposed = t - st.finish;
    const double emb = s == 0 || s == par.pp - 1 ? cm.embedding_allreduce() : 0.0;
    t += emb;
    // The distributed optimizer shards over the data- and context-parallel ranks together.
    double optim = cm.optimizer_step(sharded ? params / (par.dp * par.cp) : params);
    // DeepSpeed's step reads the gradient norm (and fp16's overflow check) one parameter tensor at
    // a time, each .item() a host sync.
    if (cm.stack.deepspeed_engine)
      optim += (stage_layer_count(split, s) * megatron_tensors_per_layer(cm.tensors) + 2) * cm.host_sync;
    t += optim;
    // mcore (--overlap-param-gather): the gather runs bucket by bucket during the next iteration's
    // first forward micro-batch, which hides up to that much of it.
    const double gather = sharded ? cm.exposed_param_gather(params, optim, st.forward / par.num_microbatches()) : 0.0;
    t += gather;
    if (s == 0) {
      r.stage0.forward_s = st.forward;
      r.stage0.backward_s = st.backward;
      r.stage0.p2p_wait_s = st.wait;
      r.stage0.dp_s = (overlap ? std::max(0.0, t - gather - optim - st.finish - emb) : dp) + emb + gather;
      r.stage0.optimizer_s = optim;
      if (par.pp > 1) r.stage0.p2p_bytes = st.sends * cm.send_bytes;
    }
    if (t > end) {
      end = t;
      r.dp_allreduce_s = (overlap ? 0.0 : dp) + gather;
      r.optimizer_s = optim;
      r.dp_reduce_exposed_s = reduce_exposed;
      r.embedding_allreduce_s = emb;
      r.param_gather_s = gather;
    }
  }
  r.dp_overlapped = overlap || par.zero == 2;
  r.model_sync_s = cm.model_parallel_sync();
  r.iter_time_s = end + r.model_sync_s;
  for (const StageMemory& m : r.memory.stages) r.activation_bytes = std::max(r.activation_bytes, m.activations);
  r.post_time_s = r.iter_time_s - r.pipeline_time_s;

  fill_throughput(r, cfg, cm.peak);
  return require_finite(r, hw);
}

}  // namespace ptdp::sim
