#include "core/sim/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "core/common/error.h"
#include "core/sim/stack.h"

namespace ptdp::sim {

namespace {

// In increasing order; O(sqrt n).
std::vector<int> divisors(int n) {
  std::vector<int> lo, hi;
  for (int i = 1; int64_t(i) * i <= n; ++i)
    if (n % i == 0) {
      lo.push_back(i);
      if (i != n / i) hi.push_back(n / i);
    }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

Precision precision_of(const PlanRequest& req, const HardwareProfile& hw) {
  return req.precision.value_or(hw.default_precision);
}

RunConfig make_config(const PlanRequest& req, Precision precision, int t, int p, int d, int v, int b,
                      ScheduleKind schedule, Recompute rc, int cp = 1) {
  RunConfig c;
  c.experiment = "plan";
  c.model = req.model;
  c.par.tp = t;
  c.par.pp = p;
  c.par.dp = d;
  c.par.cp = cp;
  c.par.vpp = v;
  c.par.micro_batch = b;
  c.par.global_batch = req.global_batch;
  c.par.schedule = schedule;
  c.par.recompute = rc;
  c.par.scatter_gather = true;
  c.stack = req.stack;
  const SoftwareStack stack = software_stack(req.stack);
  c.par.sequence_parallel = t > 1 && stack.sequence_parallel;
  c.ranks = t * cp * p * d;
  c.backend = precision == Precision::F32 ? BackendKind::Cpu : BackendKind::Cuda;
  c.precision = precision;
  // DeepSpeed trains bf16 with its BF16_Optimizer, which always shards (stack.h).
  if (bf16_optimizer(stack, precision) && d > 1) c.par.zero = 1;
  return c;
}

// The context-parallel sizes tried with t: 1, and under a stack with context parallelism the
// powers of two up to req.max_cp that divide N / t and s / 2.
std::vector<int> cp_sizes(const PlanRequest& req, int t) {
  std::vector<int> out{1};
  if (!software_stack(req.stack).context_parallel) return out;
  for (int c = 2; c <= req.max_cp; c *= 2)
    if ((req.gpus / t) % c == 0 && req.model.seq_length % (2 * c) == 0) out.push_back(c);
  return out;
}


void check_request(const PlanRequest& req, const HardwareProfile& hw) {
  // The same bounds as a training run's (validate_run): every product of t, p, d, b and the
  // micro-batch count stays far inside 32 bits, and the search stays below a second.
  if (req.gpus <= 0) usage_error("--gpus {} must be positive", req.gpus);
  if (req.gpus > kMaxPlanGpus) usage_error("--gpus {} must be at most {}", req.gpus, kMaxPlanGpus);
  if (req.global_batch <= 0) usage_error("--global-batch {} must be positive", req.global_batch);
  if (req.global_batch > kMaxPlanGlobalBatch)
    usage_error("--global-batch {} must be at most {}", req.global_batch, kMaxPlanGlobalBatch);
  if (req.top <= 0) usage_error("--top {} must be positive", req.top);
  if (req.max_cp < 1) usage_error("--max-cp {} must be positive", req.max_cp);
  for (int b : req.micro_batches)
    if (b <= 0 || b > kMaxPlanGlobalBatch)
      usage_error("--micro-batches: {} must be in [1, {}]", b, kMaxPlanGlobalBatch);
  if (req.zero_modes.empty()) usage_error("--zero-modes: give at least one of 0, 1, 2, 3");
  const SoftwareStack stack = software_stack(req.stack);  // UsageError naming --stack
  for (int z : req.zero_modes) {
    if (z < 0 || z > 3) usage_error("--zero-modes: {} must be 0, 1, 2 or 3", z);
    if (z == 2 && !stack.zero2)
      usage_error("--zero-modes 2: --stack {} has no ZeRO-2 model (Megatron-FSDP's optim_grads, --stack mcore)",
                  req.stack);
  }
  const Precision prec = precision_of(req, hw);
  if (!(hw.peak(prec) > 0))
    usage_error("--precision {}: hardware profile '{}' has no {} peak", prec, hw.name, prec);
}

}  // namespace

std::optional<PlanEntry> paper_heuristic(const PlanRequest& req, const HardwareProfile& hw, const SimOptions& opt,
                                         std::string* note) {
  check_request(req, hw);
  const Precision prec = precision_of(req, hw);
  const ModelConfig& m = req.model;
  int t = 1;
  for (int c : divisors(std::min(hw.gpus_per_node, req.gpus)))
    if (m.heads % c == 0 && m.groups() % c == 0 && m.ffn_hidden() % c == 0 && req.gpus % c == 0) t = c;
  // Why no layout came out, for the note: memory, the batch not dividing, or the replay bound.
  int fitting = 0, batch_mismatch = 0, beyond_bound = 0;
  for (int p : divisors(m.layers)) {
    if (req.gpus % (t * p) != 0) continue;
    const int d = req.gpus / (t * p);
    if (req.global_batch % d != 0) {
      ++batch_mismatch;
      continue;
    }
    if (!memory_verdict(make_config(req, prec, t, p, d, 1, 1, ScheduleKind::OneFOneB, Recompute::Full), hw).fits) continue;
    ++fitting;
    // Takeaway #3: the best micro-batch size for this (t, p, d) among those that fit.
    std::optional<PlanEntry> best;
    for (int b : req.micro_batches) {
      if ((req.global_batch / d) % b != 0) continue;
      if (req.global_batch / d / b > kMaxSimMicrobatches) {  // beyond what the simulator replays
        ++beyond_bound;
        continue;
      }
      const RunConfig c = make_config(req, prec, t, p, d, 1, b, ScheduleKind::OneFOneB, Recompute::Full);
      if (!memory_verdict(c, hw).fits) continue;
      PlanEntry e{c, simulate(c, hw, opt)};
      if (!best || e.result.iter_time_s < best->result.iter_time_s) best = std::move(e);
    }
    if (!best) continue;
    if (note)
      *note = fmt::format("t = {} (devices per node {}), smallest p that fits = {}, d = {}; 1f1b, full recompute, "
                          "best b = {}",
                          t, hw.gpus_per_node, p, d, best->cfg.par.micro_batch);
    return best;
  }
  if (note) {
    if (fitting == 0)
      *note = fmt::format("no p with t = {} fits in memory with full recomputation", t);
    else if (beyond_bound > 0)
      *note = fmt::format("t = {}: the layouts that fit in memory need more than {} micro-batches per pipeline "
                          "(--global-batch / d / b), beyond what the simulator replays",
                          t, kMaxSimMicrobatches);
    else
      *note = fmt::format("t = {}: no micro-batch size in the list divides --global-batch / d for a layout that fits",
                          t);
    if (batch_mismatch > 0)
      *note += fmt::format("; {} layout(s) skipped because d does not divide --global-batch {}", batch_mismatch,
                           req.global_batch);
  }
  return std::nullopt;
}

// Uneven splits: the middle stages at ceil(L/p) layers rounded up to whole chunks, or one chunk more, and the rest shared by
// the two ends (94 layers on 12 stages: 7 | 8 x 10 | 7; 96 layers: 3 | 9 x 10 | 3 beside the even
// split); for p = 2, L/2 (in whole chunks) and one chunk more on the first stage. Every split
// returned is valid (layer_split_error), and none twice.
std::vector<LayerSplit> stage_splits(int layers, int p, int v) {
  std::vector<LayerSplit> out;
  auto same = [&](const LayerSplit& a, const LayerSplit& b) {  // every chunk holds the same layers
    for (int r = 0; r < p; ++r)
      for (int j = 0; j < v; ++j)
        if (chunk_layers(a, r, j) != chunk_layers(b, r, j)) return false;
    return true;
  };
  auto add = [&](const LayerSplit& s) {
    if (!layer_split_error(s).empty()) return;
    for (const LayerSplit& o : out)
      if (same(o, s)) return;
    out.push_back(s);
  };
  if (layers % (p * v) == 0) add({layers, p, v});
  if (p < 2) return out;
  auto ends = [&](int rest, int extra) {  // the ends share `rest` layers, the first `extra` more
    const int first = rest / (2 * v) * v + extra;
    if (first > 0 && rest - first > 0) add({layers, p, v, first, rest - first});
  };
  if (p == 2) {
    for (int extra : {0, v}) ends(layers, extra);
  } else {
    const int middle = ((layers + p - 1) / p + v - 1) / v * v;
    for (int m : {middle, middle + v}) ends(layers - (p - 2) * m, 0);
  }
  // Megatron-core's counted edges: the embedding and the loss each take a layer's place in the
  // first chunk of stage 0 and the last chunk of stage p-1 (one chunk lighter, not a whole stage).
  for (auto [embedding, loss] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    LayerSplit s{layers, p, v};
    s.embedding = embedding, s.loss = loss;
    add(s);
  }
  return out;
}

namespace {

struct Candidate {
  RunConfig cfg;
  double lower_bound;
};

// One (t, c, p, d, b): every schedule, placement, recomputation and sharding of it that the stack
// runs, counted in `out`; those that fit in memory become candidates.
struct LayoutSearch {
  const PlanRequest& req;
  const HardwareProfile& hw;
  const SimOptions& opt;
  Precision prec;
  PlanResult& out;
  std::vector<Candidate>& cands;

  void add(int t, int cp, int p, int d, int b) {
    const ModelConfig& model = req.model;
    const int m = req.global_batch / d / b;
    struct Sched {
      ScheduleKind kind;
      LayerSplit split;
    };
    std::vector<Sched> scheds;
    for (const LayerSplit& s : stage_splits(model.layers, p, 1)) {
      scheds.push_back({ScheduleKind::OneFOneB, s});
      if (p > 1) scheds.push_back({ScheduleKind::GPipe, s});
    }
    if (p > 1 && m % p == 0)
      for (int v = 2; v <= std::min(req.max_vpp, model.layers / p); ++v)  // v <= l / p chunks
        if (int64_t(m) * v <= kMaxSimMicrobatches)
          for (const LayerSplit& s : stage_splits(model.layers, p, v)) scheds.push_back({ScheduleKind::Interleaved, s});
    for (const Sched& s : scheds)
      for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
        for (int zero : req.zero_modes) try_one(make_config(req, prec, t, p, d, s.split.v, b, s.kind, rc, cp), s.split, zero);
  }

  void try_one(RunConfig c, const LayerSplit& split, int zero) {
    const ParallelConfig& pc = c.par;
    if (zero > 0 && pc.dp * pc.cp == 1) return;                      // nothing to shard over
    if (zero == 3 && (pc.tp > 1 || pc.pp > 1)) return;                // ZeRO-3 without model parallelism
    if (zero == 3 && req.model.arch == Arch::Llama) return;          // replayed for GPT's modules only
    c.par.zero = zero;
    c.par.first_stage_layers = split.first, c.par.last_stage_layers = split.last;
    c.par.embedding_in_split = split.embedding, c.par.loss_in_split = split.loss;
    if (!stack_refusal(c).empty()) return;  // a schedule or sharding the stack does not have
    ++out.layouts;
    if (!memory_verdict(c, hw, {}, opt.zero3).fits) return;
    ++out.fit;
    const double lb = iteration_lower_bound(c, CostModel(c, hw, opt));
    if (!std::isfinite(lb))  // the profile's bounds (hardware.h) keep it finite
      usage_error("{}: the simulated iteration time of a layout is {} with this profile's numbers; check the "
                  "profile's values",
                  hw.path, lb);
    cands.push_back({std::move(c), lb});
  }
};

}  // namespace

PlanResult plan(const PlanRequest& req, const HardwareProfile& hw, const SimOptions& opt) {
  check_request(req, hw);
  const Precision prec = precision_of(req, hw);
  const ModelConfig& model = req.model;
  PlanResult out;
  std::vector<Candidate> cands;
  LayoutSearch search{req, hw, opt, prec, out, cands};
  for (int t : divisors(req.gpus)) {
    // heads, whole query groups and the MLP split over t
    if (model.heads % t != 0 || model.groups() % t != 0 || model.ffn_hidden() % t != 0) continue;
    for (int cp : cp_sizes(req, t))
      for (int p : divisors(req.gpus / t / cp)) {
        if (stage_splits(model.layers, p, 1).empty()) continue;
        const int d = req.gpus / (t * cp * p);
        if (req.global_batch % d != 0) continue;
        for (int b : req.micro_batches) {
          if ((req.global_batch / d) % b != 0) continue;
          if (req.global_batch / d / b > kMaxSimMicrobatches) continue;  // beyond what the simulator replays
          search.add(t, cp, p, d, b);
        }
      }
  }
  if (out.layouts == 0)
    usage_error("--gpus {} and --global-batch {}: no layout of t, p, d divides model {} (heads {}, layers {}) and the batch",
                req.gpus, req.global_batch, model.name, model.heads, model.layers);

  // Simulate the most promising first; stop once a lower bound cannot beat the top-k.
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.lower_bound < b.lower_bound; });
  std::vector<PlanEntry> done;
  auto kth_best = [&]() {
    if (int(done.size()) < req.top) return std::numeric_limits<double>::infinity();
    std::nth_element(done.begin(), done.begin() + (req.top - 1), done.end(),
                     [](const PlanEntry& a, const PlanEntry& b) { return a.result.iter_time_s < b.result.iter_time_s; });
    return done[req.top - 1].result.iter_time_s;
  };
  double bound = std::numeric_limits<double>::infinity();
  for (const Candidate& c : cands) {
    if (!req.exhaustive && c.lower_bound >= bound) break;
    done.push_back({c.cfg, simulate(c.cfg, hw, opt)});
    ++out.simulated;
    if (req.progress) req.progress(out.simulated, int64_t(cands.size()));
    if (int(done.size()) >= req.top) bound = kth_best();
  }
  std::sort(done.begin(), done.end(),
            [](const PlanEntry& a, const PlanEntry& b) { return a.result.iter_time_s < b.result.iter_time_s; });
  if (int(done.size()) > req.top) done.resize(req.top);
  for (PlanEntry& e : done) e.why = cp_reason(e, hw, opt);
  out.best = std::move(done);
  out.heuristic = paper_heuristic(req, hw, opt, &out.heuristic_note);
  return out;
}

namespace {

// The same layout without context parallelism, its c ranks given to d; where the global batch does
// not divide (or the interleaved schedule's micro-batches do not), one of as many micro-batches a
// pipeline, for the memory check. *same_batch: the first case.
RunConfig without_cp(const RunConfig& cfg, bool* same_batch) {
  RunConfig twin = cfg;
  ParallelConfig& p = twin.par;
  p.dp *= p.cp;
  p.cp = 1;
  twin.ranks = p.tp * p.pp * p.dp;
  const int64_t per_step = int64_t(p.micro_batch) * p.dp;
  *same_batch = p.global_batch % per_step == 0 &&
                (p.schedule != ScheduleKind::Interleaved || (p.global_batch / per_step) % p.pp == 0);
  if (!*same_batch) p.global_batch = int(cfg.par.num_microbatches() * per_step);
  return twin;
}

}  // namespace

std::string cp_reason(const PlanEntry& e, const HardwareProfile& hw, const SimOptions& opt) {
  const ParallelConfig& p = e.cfg.par;
  if (p.cp <= 1) return {};
  bool same_batch = false;
  const RunConfig twin = without_cp(e.cfg, &same_batch);
  const MemoryVerdict mem = memory_verdict(twin, hw, {}, opt.zero3);
  const double act = mem.stages[size_t(mem.worst_stage)].activations / 1e9;
  const double act_cp = e.result.memory.stages[size_t(mem.worst_stage)].activations / 1e9;
  if (!mem.fits)
    return fmt::format("memory: with c = 1 (d = {}) a device needs {:.1f} GB of its {:.1f} GB (activations {:.1f} GB; "
                       "{:.1f} GB with c = {})",
                       twin.par.dp, mem.peak / 1e9, mem.capacity / 1e9, act, act_cp, p.cp);
  if (!same_batch)
    return fmt::format("batch: c = 1 would fit ({:.1f} GB) but d = {} does not divide the global batch {} into "
                       "micro-batches of {}{}",
                       mem.peak / 1e9, twin.par.dp, p.global_batch, p.micro_batch,
                       p.schedule == ScheduleKind::Interleaved ? ", a multiple of p = " + std::to_string(p.pp) +
                                                                     " of them a pipeline"
                                                               : std::string());
  const SimResult r = simulate(twin, hw, opt);
  return fmt::format("compute: c = 1 (d = {}, m = {}) fits ({:.1f} GB) but takes {:.3f} s, {:+.1f}% (bubble {:.3f}; "
                     "here {:.3f})",
                     twin.par.dp, twin.par.num_microbatches(), mem.peak / 1e9, r.iter_time_s,
                     100 * (r.iter_time_s / e.result.iter_time_s - 1), r.bubble_fraction, e.result.bubble_fraction);
}

}  // namespace ptdp::sim
