#include "core/sim/zero3.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "core/common/error.h"

namespace ptdp::sim {

namespace {

// The elements of a module's tensors (t = 1), in DeepSpeed's order: its weight and bias, then its
// norm's (tensor_inventory.h).
std::vector<double> module_numels(const ModelTensors& m, int module) {
  std::vector<double> n;
  for (const ModelTensor* x : m.module_tensors(module)) n.push_back(double(x->numel()));
  return n;
}
std::vector<double> numels(const std::vector<ModelTensor>& tensors) {
  std::vector<double> n;
  for (const ModelTensor& x : tensors) n.push_back(double(x.numel()));
  return n;
}

// One step of the trace: a module's forward, recomputed forward or backward.
struct Step {
  int module = 0;               // which module (for the reuse distance)
  std::vector<int> params;      // partitioned tensors it needs gathered
  double compute = 0;           // seconds on the compute stream after its fetch
  double pre = 0;               // seconds of its pass that run before its fetch (LayerNorm, attention backward)
  bool backward = false;
  std::vector<double> grads;    // elements of the gradients it completes, in order (its weight, then
                                // its small tensors: Megatron computes them right after)
  double all_numel = 0;         // every tensor of the module (DeepSpeed's reuse distance counts them)
};

struct Trace {
  std::vector<double> numel;    // per partitioned tensor
  std::vector<Step> steps;
};

Trace build_trace(const RunConfig& cfg, const CostModel& cm, const Zero3Options& o) {
  const ModelConfig& m = cfg.model;
  Trace tr;
  // A module's tensors: the partitioned ones get ids; the rest stay on every device.
  auto module_params = [&](const std::vector<double>& tensors, std::vector<int>& ids, double& all) {
    for (double n : tensors) {
      all += n;
      if (n < o.persistence_threshold) continue;
      ids.push_back(int(tr.numel.size()));
      tr.numel.push_back(n);
    }
  };
  // Gradients of a module's tensors as they complete: the partitioned ones, then the small ones.
  auto module_grads = [&](const std::vector<double>& tensors) {
    std::vector<double> g;
    for (double n : tensors)
      if (n >= o.persistence_threshold) g.push_back(n);
    for (double n : tensors)
      if (n < o.persistence_threshold) g.push_back(n);
    return g;
  };
  const ModelTensors tensors = model_tensors(m, m.padded_vocab(1));
  const double word_numel = double(tensors.embedding().numel());
  // Embedding: word (shared with the output layer) and position tables.
  Step embed;
  embed.module = 0;
  module_params(numels(tensors.first), embed.params, embed.all_numel);
  const int word = embed.params.empty() || tr.numel.front() != word_numel ? -1 : embed.params.front();
  embed.compute = cm.edges.embed_forward.total();
  // Layers: each module's tensors once.
  std::vector<std::vector<int>> ids(size_t(m.layers) * kLayerModules);
  std::vector<double> all(ids.size(), 0.0);
  for (int l = 0; l < m.layers; ++l)
    for (int i = 0; i < kLayerModules; ++i)
      module_params(module_numels(tensors, i), ids[size_t(l) * kLayerModules + i], all[size_t(l) * kLayerModules + i]);
  auto layer_step = [&](int l, int i, const PassCost& pass, const PassCost& pre, bool backward) {
    Step s;
    s.module = 1 + l * kLayerModules + i;
    s.params = ids[size_t(l) * kLayerModules + i];
    s.all_numel = all[size_t(l) * kLayerModules + i];
    s.pre = pre.total();
    s.compute = pass.total() - s.pre;
    s.backward = backward;
    if (backward) s.grads = module_grads(module_numels(tensors, i));
    return s;
  };
  const int head_module = 1 + m.layers * kLayerModules;
  Step head;
  head.module = head_module;
  if (word >= 0) head.params = {word};
  head.all_numel = word_numel;  // the output layer is the word embedding, with the final LayerNorm
  for (const ModelTensor& x : tensors.last) head.all_numel += double(x.numel());
  head.compute = cm.edges.head_forward.total();

  tr.steps.push_back(embed);
  for (int l = 0; l < m.layers; ++l)
    for (int i = 0; i < kLayerModules; ++i)
      tr.steps.push_back(layer_step(l, i, cm.modules[i].forward, cm.modules[i].forward_pre, false));
  tr.steps.push_back(head);
  Step head_bw = head;
  head_bw.compute = cm.edges.head_backward.total();
  head_bw.backward = true;  // the tied word-embedding gradient completes in the embedding's backward
  tr.steps.push_back(head_bw);
  const Recompute rc = cfg.par.recompute;
  for (int l = m.layers - 1; l >= 0; --l) {
    // Full recomputation runs the layer's forward again, module by module, fetching each module's
    // weights; selective recomputation (attention core only) needs no weights: it joins QKV's backward.
    if (rc == Recompute::Full)
      for (int i = 0; i < kLayerModules; ++i)
        tr.steps.push_back(layer_step(l, i, cm.modules[i].recompute, cm.modules[i].recompute_pre, false));
    for (int i = kLayerModules - 1; i >= 0; --i) {
      Step st = layer_step(l, i, cm.modules[i].backward, cm.modules[i].backward_pre, true);
      if (rc == Recompute::Selective) st.pre += cm.modules[i].recompute.total();  // inside the attention backward
      tr.steps.push_back(st);
    }
  }
  Step embed_bw = embed;
  embed_bw.compute = cm.edges.embed_backward.total();
  embed_bw.backward = true;
  embed_bw.grads = module_grads(numels(tensors.first));
  tr.steps.push_back(embed_bw);
  // What runs before a module's fetch runs while the previous module's segment is in progress.
  for (size_t k = 1; k < tr.steps.size(); ++k) tr.steps[k - 1].compute += tr.steps[k].pre;
  return tr;
}

// Per step: DeepSpeed's reuse distance of its module, the elements of the modules used between
// this step and the module's next use (infinite if none).
std::vector<double> reuse_distances(const Trace& tr) {
  const size_t n = tr.steps.size();
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + tr.steps[i].all_numel;
  std::vector<double> dist(n, std::numeric_limits<double>::infinity());
  std::vector<long> next_use;  // by module, scanning backwards
  for (size_t k = n; k-- > 0;) {
    const size_t mod = size_t(tr.steps[k].module);
    if (next_use.size() <= mod) next_use.resize(mod + 1, -1);
    if (next_use[mod] >= 0) dist[k] = prefix[size_t(next_use[mod])] - prefix[k + 1];
    next_use[mod] = long(k);
  }
  return dist;
}

enum class State { Partitioned, InFlight, Available };

struct Replay {
  const Trace& tr;
  const std::vector<double>& dist;
  const Zero3Options& o;
  std::function<double(double)> gather_time, reduce_time;  // of a tensor of n elements
  double elem = 2;

  std::vector<State> state;
  std::vector<double> ready;     // when an in-flight gather completes
  std::vector<int> in_flight;    // prefetched tensors not yet waited for
  double now = 0;                // the compute stream (and the host, which synchronises with it)
  double nic = 0;                // when the NIC has finished everything queued so far
  double bucket = 0;             // gradient elements waiting for a reduce-scatter
  double gathered_now = 0;
  Zero3Timeline t;

  Replay(const Trace& trace, const std::vector<double>& d, const Zero3Options& opt)
      : tr(trace), dist(d), o(opt), state(trace.numel.size(), State::Partitioned), ready(trace.numel.size(), 0) {}

  void gather(int p) {
    const double start = std::max(now, nic);
    const double dt = gather_time(tr.numel[p]);
    nic = start + dt;
    t.comm_s += dt;
    t.gathers += 1;
    t.gather_bytes += tr.numel[p] * elem;
    state[p] = State::InFlight;
    ready[p] = nic;
    gathered_now += tr.numel[p];
    t.peak_gathered = std::max(t.peak_gathered, gathered_now);
  }

  void reduce_bucket() {
    if (bucket <= 0) return;
    const double start = std::max(now, nic);
    const double dt = reduce_time(bucket);
    nic = start + dt;
    t.comm_s += dt;
    t.reduce_bytes += bucket * elem;
    bucket = 0;
  }

  void run_micro_batch() {
    const size_t n = tr.steps.size();
    for (size_t i = 0; i < n; ++i) {
      const Step& s = tr.steps[i];
      // Fetch: gather what is not there, and wait (DeepSpeed synchronises the device, so every
      // queued collective, reductions included, must be done).
      bool wait = false;
      for (int p : s.params) {
        if (state[p] == State::Partitioned) gather(p);
        if (state[p] == State::InFlight) wait = true;
      }
      if (wait) {
        now = std::max(now, nic);
        for (int p : in_flight) state[p] = State::Available;
        in_flight.clear();
        for (int p : s.params) state[p] = State::Available;
      }
      // Prefetch the next steps' tensors (at least prefetch_bucket elements), one batch at a time.
      if (in_flight.empty()) {
        double queued = 0;
        for (size_t k = i + 1; k < n && queued < o.prefetch_bucket; ++k)
          for (int p : tr.steps[k].params) {
            if (state[p] != State::Partitioned || queued >= o.prefetch_bucket) continue;
            gather(p);
            in_flight.push_back(p);
            queued += tr.numel[p];
          }
      }
      now += s.compute;
      t.compute_s += s.compute;
      (s.backward ? t.backward_s : t.forward_s) += s.compute;
      // Release unless the module runs again soon.
      if (!(dist[i] < o.max_reuse_distance))
        for (int p : s.params)
          if (state[p] == State::Available) {
            state[p] = State::Partitioned;
            gathered_now -= tr.numel[p];
          }
      // Gradients into the reduce bucket; one that would overflow it is preceded by a reduce-scatter
      // of what the bucket holds (DeepSpeed's rule; so a weight larger than the bucket is reduced as
      // soon as the next gradient, its module's bias or LayerNorm, arrives).
      for (double g : s.grads) {
        if (bucket > 0 && bucket + g > o.reduce_bucket) reduce_bucket();
        bucket += g;
      }
    }
    reduce_bucket();
    // The iteration's parameters are partitioned again for the optimizer step.
    for (size_t p = 0; p < state.size(); ++p) state[p] = State::Partitioned;
    in_flight.clear();
    gathered_now = 0;
    now = std::max(now, nic);
  }
};

}  // namespace

double zero3_persistent_params(const RunConfig& cfg, const Zero3Options& o) {
  const ModelTensors m = model_tensors(cfg.model, cfg.model.padded_vocab(1));
  double persistent = 0;
  auto add = [&](const std::vector<double>& tensors) {
    for (double n : tensors)
      if (n < o.persistence_threshold) persistent += n;
  };
  for (int i = 0; i < kLayerModules; ++i) add(module_numels(m, i));
  persistent *= m.layers;
  add(numels(m.first));
  add(numels(m.last));
  return persistent;
}

double zero3_gathered_bytes(const RunConfig& cfg, const Zero3Options& o) {
  const ModelTensors m = model_tensors(cfg.model, cfg.model.padded_vocab(1));
  const double elem = HardwareProfile::element_bytes(cfg.precision);
  // The largest module, and the largest pair of consecutive ones (computing and prefetched).
  std::vector<double> sizes;
  for (int i = 0; i < kLayerModules; ++i) {
    double n = 0;
    for (double x : module_numels(m, i))
      if (x >= o.persistence_threshold) n += x;
    sizes.push_back(n);
  }
  double largest = 0, pair = 0;
  for (int i = 0; i < kLayerModules; ++i) {
    largest = std::max(largest, sizes[i]);
    pair = std::max(pair, sizes[i] + sizes[(i + 1) % kLayerModules]);
  }
  const double word = double(m.embedding().numel());
  largest = std::max(largest, word);
  pair = std::max(pair, word + sizes[0]);
  return elem * (pair + largest + 2 * o.reduce_bucket);
}

Zero3Timeline replay_zero3(const RunConfig& cfg, const CostModel& cm) {
  const ParallelConfig& par = cfg.par;
  if (par.zero != 3) usage_error("--zero {}: the ZeRO-3 replay needs --zero 3", par.zero);
  if (par.tp != 1 || par.pp != 1)
    usage_error("--zero 3 needs --tp 1 and --pp 1 (DeepSpeed's ZeRO-3 without model parallelism, as in the paper), "
                "got --tp {} --pp {}",
                par.tp, par.pp);
  const Zero3Options& o = cm.opt.zero3;
  const Trace tr = build_trace(cfg, cm, o);
  const std::vector<double> dist = reuse_distances(tr);
  Replay r(tr, dist, o);
  r.elem = cm.elem;
  const HardwareProfile& hw = cm.hw;
  const int d = par.dp;
  const int per_node = std::min(d, hw.gpus_per_node);
  const double elem = cm.elem;
  auto collective = [&cm, d, per_node, elem, &o](double n) {
    if (d <= 1) return 0.0;
    return cm.net.sharded_collective(n * elem, d, per_node, o.flat_collectives);
  };
  r.gather_time = collective;
  r.reduce_time = collective;
  // Every micro-batch repeats the same trace (DeepSpeed reduce-scatters at every micro-step): two
  // are replayed, the others take as long as the second.
  const int m = par.num_microbatches();
  r.run_micro_batch();
  const Zero3Timeline first = r.t;
  const double first_end = r.now;
  double end = first_end;
  if (m > 1) {
    r.run_micro_batch();
    const double step = r.now - first_end;
    end = first_end + (m - 1) * step;
    const double k = m - 1;
    Zero3Timeline& t = r.t;
    t.compute_s = first.compute_s + k * (t.compute_s - first.compute_s);
    t.forward_s = first.forward_s + k * (t.forward_s - first.forward_s);
    t.backward_s = first.backward_s + k * (t.backward_s - first.backward_s);
    t.comm_s = first.comm_s + k * (t.comm_s - first.comm_s);
    t.gathers = first.gathers + k * (t.gathers - first.gathers);
    t.gather_bytes = first.gather_bytes + k * (t.gather_bytes - first.gather_bytes);
    t.reduce_bytes = first.reduce_bytes + k * (t.reduce_bytes - first.reduce_bytes);
  }
  Zero3Timeline out = r.t;
  out.end_s = end;
  out.exposed_comm_s = std::max(0.0, end - out.compute_s);
  return out;
}

}  // namespace ptdp::sim
