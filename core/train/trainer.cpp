#include "core/train/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/backend/nvtx.h"

namespace ptdp {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// p2p tags: the receiver's (micro-batch, chunk) and the direction.
int tag_of(int microbatch, int chunk, int v, bool backward) { return ((microbatch * v + chunk) << 1) | int(backward); }

void sum_scalar(Communicator* c, double& x) {
  if (!c || c->size() == 1) return;
  Tensor t = Tensor::empty({1}, DType::F64);
  t.data<double>()[0] = x;
  c->all_reduce(t, ReduceOp::Sum);
  x = t.data<double>()[0];
}

}  // namespace

void load_microbatch(const SampleSource& data, int64_t first, int b, Tensor& tokens, Tensor& targets) {
  const int s = data.seq_len();
  std::vector<int32_t> buf(s + 1);
  int32_t* tok = tokens.data<int32_t>();
  int32_t* tgt = targets.data<int32_t>();
  for (int j = 0; j < b; ++j) {
    data.get(first + j, buf.data());
    for (int i = 0; i < s; ++i) {
      tok[int64_t(j) * s + i] = buf[i];
      tgt[int64_t(j) * s + i] = buf[i + 1];
    }
  }
}

Tensor context_rows(const Tensor& x, int b, int s, const ContextParallel& cp) {
  if (cp.size == 1) return x;
  const Tensor pos = cp_positions(b, s, cp);
  const int64_t sl = s / cp.size;
  Tensor out = Tensor::empty({int64_t(b) * sl}, x.dtype());
  const int32_t* p = pos.data<int32_t>();
  const int32_t* in = x.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  for (int j = 0; j < b; ++j)
    for (int64_t i = 0; i < sl; ++i) o[j * sl + i] = in[int64_t(j) * s + p[j * sl + i]];
  return out;
}

Trainer::Trainer(std::vector<Gpt*> chunks, const SampleSource& data, const TrainConfig& cfg,
                 const TrainerGroups& groups)
    : chunks_(std::move(chunks)), data_(data), cfg_(cfg), groups_(groups), scaler_(cfg.loss_scale) {
  PTDP_CHECK(!chunks_.empty(), "a trainer needs a model");
  PTDP_CHECK(cfg.micro_batch > 0 && cfg.global_batch % (cfg.micro_batch * dp_size()) == 0,
             "the global batch must be a multiple of micro-batch x data-parallel size");
  PTDP_CHECK(data.seq_len() == chunk(0).config().seq_length, "data and model disagree on the sequence length");
  const int v = static_cast<int>(chunks_.size());
  PTDP_CHECK(v == 1 || cfg.schedule == ScheduleKind::Interleaved, "several chunks need the interleaved schedule");
  actions_ = make_schedule(cfg.schedule, stages(), num_microbatches(), v, stage());
  PTDP_CHECK(cfg.zero == 0 || cfg.zero == 1 || cfg.zero == 3, "--zero {} must be 0, 1 or 3", cfg.zero);
  if (cfg.zero == 3) {
    Gpt& g = chunk(0);
    PTDP_CHECK(v == 1 && stages() == 1 && g.shard().tp_size == 1, "--zero 3 needs t = p = 1");
    store_ = std::make_unique<ShardedParams>(g.backend(), param_units(g.layout(), g.config().layers), g.params(),
                                             g.grads().dtype(), grad_group());
    g.use_param_source(store_.get());
    opt_.push_back(std::make_unique<AdamW>(g.backend(), g.layout(), store_->params(), store_->grads(), cfg.optimizer,
                                           store_->owned(), true));
    opt_.back()->set_norm_group(groups.mp, 0);
    sync_.push_back(nullptr);  // the model reduces each unit's gradients itself
  } else {
    const bool sharded = cfg.zero == 1;
    for (Gpt* c : chunks_) {
      sync_.push_back(std::make_unique<GradSync>(c->backend(), c->grads(), grad_group(), cfg.grad_bucket_elems,
                                                 cfg.overlap_grad_reduce, sharded, cfg.grad_reduce_bf16));
      // Sharded: the tied embedding's gradient is summed with the other end of the pipeline
      // before its buckets are reduce-scattered (the two ends lay it out at different offsets).
      const ParamEntry* wte = c->layout().find("wte");
      if (sharded && groups.embedding && groups.embedding->size() > 1 && c->config().tied_embedding() && wte)
        sync_.back()->hold(wte->offset, wte->offset + shape_numel(wte->shape));
      opt_.push_back(std::make_unique<AdamW>(c->backend(), c->layout(), c->params(), c->grads(), cfg.optimizer,
                                             sharded ? sync_.back()->owned() : std::vector<FlatRange>{}));
      opt_.back()->set_norm_group(groups.mp, c->shard().tp_rank);
    }
  }
  // Sequence parallelism: each tensor-parallel rank already holds its own n/t rows of the
  // activations between stages, and sends exactly those; scatter/gather has nothing to add.
  link_ = std::make_unique<StageLink>(groups.pp, groups.tp, cfg.scatter_gather && !chunk(0).sequence_parallel(),
                                      &chunk(0).backend());
}

void Trainer::run_schedule(const std::vector<Action>& actions, const SampleSource& data, int64_t batch_start,
                           bool forward_only, IterStats& st, double& loss_sum) {
  const int b = cfg_.micro_batch, s = chunk(0).config().seq_length, h = chunk(0).config().hidden;
  const int p = stages(), v = static_cast<int>(chunks_.size()), m = num_microbatches();
  const int64_t n = int64_t(b) * s;
  const int64_t rows = chunk(0).stage_rows(b);  // of the activations between stages: n, or n/t (sp)
  // d(objective)/d(per-token loss), times the loss scale (undone before the update)
  const double loss_scale = scaler_.scale() / (double(cfg_.global_batch) * s);
  const DType act_dtype = chunk(0).dtype();
  // Megatron-LM's sampler (MegatronPretrainingSampler): the global batch is read in rounds of
  // b x d samples, and micro-batch k of data-parallel rank r is round k's r-th b samples.
  const int d = dp_size();
  auto microbatch_start = [&](int k) { return batch_start + (int64_t(k) * d + dp_rank()) * b; };
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  std::map<Key, Tensor> inputs, outputs, grads_in;
  std::map<Key, std::unique_ptr<Gpt::Cache>> caches;
  int64_t live_bytes = 0;
  const Shape act_shape{rows, h};
  struct Mark {
    Backend* be;
    int64_t from, to;
    bool backward;
  };
  std::vector<Mark> marks;  // around every forward and backward pass
  for (const Action& a : actions) {
    const Key key{a.microbatch, a.chunk};
    Gpt& g = chunk(a.chunk);
    switch (a.op) {
      case Op::RecvForward: {
        NvtxRange r("p2p recv forward");
        Peer from = backward_peer(p, stage(), a.chunk);
        inputs[key] = link_->recv(act_shape, act_dtype, from.stage, tag_of(a.microbatch, a.chunk, v, false));
        break;
      }
      case Op::Forward: {
        Tensor tokens = Tensor::empty({n}, DType::I32), targets = Tensor::empty({n}, DType::I32);
        if (g.shard().pre || g.shard().post) {
          load_microbatch(data, microbatch_start(a.microbatch), b, tokens, targets);
          tokens = to_backend(g.backend(), context_rows(tokens, b, s, g.context_parallel()));
          targets = to_backend(g.backend(), context_rows(targets, b, s, g.context_parallel()));
        }
        const Tensor input = g.shard().pre ? tokens : inputs.at(key);
        inputs.erase(key);
        Tensor out;
        double loss = 0;
        {
          NvtxRange r("forward");
          const int64_t m0 = g.backend().mark();
          caches[key] = g.forward(b, input, g.shard().post ? &targets : nullptr, cfg_.recompute,
                                  g.shard().post ? nullptr : &out, &loss);
          marks.push_back({&g.backend(), m0, g.backend().mark(), false});
        }
        if (g.shard().post) loss_sum += loss;
        else outputs[key] = out;
        if (forward_only) {  // nothing is kept for a backward pass
          caches.erase(key);
          break;
        }
        live_bytes += caches[key]->bytes();
        st.peak_activation_bytes = std::max(st.peak_activation_bytes, live_bytes);
        break;
      }
      case Op::SendForward: {
        NvtxRange r("p2p send forward");
        Peer to = forward_peer(p, stage(), a.chunk);
        link_->send(outputs.at(key), to.stage, tag_of(a.microbatch, to.chunk, v, false));
        outputs.erase(key);
        break;
      }
      case Op::RecvBackward: {
        NvtxRange r("p2p recv backward");
        Peer from = forward_peer(p, stage(), a.chunk);
        grads_in[key] = link_->recv(act_shape, act_dtype, from.stage, tag_of(a.microbatch, a.chunk, v, true));
        break;
      }
      case Op::Backward: {
        auto& cache = caches.at(key);
        live_bytes -= cache->bytes();
        GradSync* sync = sync_[a.chunk].get();
        const bool last = sync && a.microbatch == m - 1;  // gradients of this chunk are complete after it
        if (last) sync->begin();
        Tensor dx;
        const Tensor* dy = g.shard().post ? nullptr : &grads_in.at(key);
        {
          NvtxRange r("backward");
          const int64_t m0 = g.backend().mark();
          g.backward(*cache, loss_scale, dy, g.shard().pre ? nullptr : &dx,
                     last ? [sync](int64_t off) { sync->ready_from(off); } : std::function<void(int64_t)>());
          marks.push_back({&g.backend(), m0, g.backend().mark(), true});
        }
        caches.erase(key);
        grads_in.erase(key);
        if (!g.shard().pre) outputs[key] = dx;
        break;
      }
      case Op::SendBackward: {
        NvtxRange r("p2p send backward");
        Peer to = backward_peer(p, stage(), a.chunk);
        link_->send(outputs.at(key), to.stage, tag_of(a.microbatch, to.chunk, v, true));
        outputs.erase(key);
        break;
      }
    }
  }
  link_->wait_sends();
  PTDP_CHECK(caches.empty() && inputs.empty() && grads_in.empty(), "the schedule left work undone");
  // Compute times from the backend's marks (device time on a GPU, read once the work is done).
  for (const Mark& k : marks) (k.backward ? st.bwd_ms : st.fwd_ms) += k.be->elapsed_ms(k.from, k.to);
  for (Gpt* c : chunks_) c->backend().release_marks();
}

std::vector<AdamW*> Trainer::optimizers() const {
  std::vector<AdamW*> v;
  for (const auto& o : opt_) v.push_back(o.get());
  return v;
}

void Trainer::reduce_and_update(IterStats& st, double loss_sum) {
  auto t0 = Clock::now();
  auto dp_range = std::make_unique<NvtxRange>(cfg_.zero ? "dp reduce-scatter" : "dp all-reduce");
  // The word embedding is tied: its copies on the first and last stage get the sum of both
  // gradients (the order of this and the data-parallel sum changes nothing; sharded, it comes
  // first, as only whole gradients can be summed between the two ends).
  auto sum_embedding = [&] {
    if (!groups_.embedding || groups_.embedding->size() == 1 || !chunk(0).config().tied_embedding()) return;
    Gpt& g = stage() == 0 ? chunk(0) : chunk(static_cast<int>(chunks_.size()) - 1);
    Tensor gw = g.grad("wte");
    groups_.embedding->all_reduce(gw, ReduceOp::Sum);
  };
  if (cfg_.zero) sum_embedding();
  for (auto& s : sync_)
    if (s) s->finish();
  // Sequence parallelism: the LayerNorm gradients are sums over this rank's rows; sum them over
  // the tensor-parallel group (after the data-parallel reduction, which no longer touches the
  // buffer; sharded, the owned pieces are right and the rest is unused).
  for (Gpt* c : chunks_) c->sum_sequence_parallel_grads();
  if (!cfg_.zero) sum_embedding();
  st.dp_ms = ms_since(t0);
  dp_range.reset();
  NvtxRange opt_range("optimizer");
  auto t1 = Clock::now();
  st.loss_scale = scaler_.scale();
  if (scaler_.scale() != 1.0) {
    if (store_) chunk(0).backend().scale_(store_->grads(), 1.0 / scaler_.scale());
    else
      for (Gpt* c : chunks_) c->backend().scale_(c->grads(), 1.0 / scaler_.scale());
  }
  Tensor sq = Tensor::zeros({1}, DType::F64);
  for (auto& o : opt_) sq.data<double>()[0] += o->local_grad_sq();
  // Non-finite values: every rank learns the first rank that saw them.
  const bool bad = !std::isfinite(sq.data<double>()[0]) || !std::isfinite(loss_sum);
  Communicator* world = groups_.world;
  const int wsize = world ? world->size() : 1, wrank = world ? world->rank() : 0;
  Tensor flag = Tensor::empty({1}, DType::I32);
  flag.data<int32_t>()[0] = bad ? wsize - wrank : 0;
  if (world && wsize > 1) world->all_reduce(flag, ReduceOp::Max);
  const bool nonfinite = flag.data<int32_t>()[0] > 0;
  if (scaler_.update(nonfinite)) {  // f16 overflow: skip the step; the scale was lowered
    st.skipped = true;
    st.grad_norm = NAN;
    st.opt_ms = ms_since(t1);
    return;
  }
  if (nonfinite) {
    const int first = wsize - flag.data<int32_t>()[0];
    if (!cfg_.skip_nonfinite)
      throw RuntimeError(fmt::format("iteration {}: non-finite loss or gradients on rank {}; stopping (--skip-nonfinite "
                                     "skips such steps)",
                                     iteration_, first));
    st.skipped = true;
    st.grad_norm = NAN;
    st.opt_ms = ms_since(t1);
    return;
  }
  if (Communicator* shards = grad_group(); cfg_.zero && shards && shards->size() > 1)
    shards->all_reduce(sq, ReduceOp::Sum);
  if (groups_.mp && groups_.mp->size() > 1) groups_.mp->all_reduce(sq, ReduceOp::Sum);
  const double norm = std::sqrt(sq.data<double>()[0]);
  for (auto& o : opt_) {
    StepInfo info = o->step_with_norm(norm);
    st.grad_norm = info.grad_norm;
    st.lr = info.lr;
  }
  sync_params();
  for (Gpt* c : chunks_) c->backend().synchronize();
  st.opt_ms = ms_since(t1);
}

void Trainer::sync_params() {
  for (size_t j = 0; j < chunks_.size(); ++j)
    if (sync_[j]) sync_[j]->gather_params(chunks_[j]->params());
}

int64_t Trainer::state_bytes() const {
  int64_t n = 0;
  for (size_t j = 0; j < chunks_.size(); ++j) {
    n += opt_[j]->own_bytes();
    n += store_ ? store_->params().nbytes() + store_->grads().nbytes()
                : chunks_[j]->params().nbytes() + chunks_[j]->grads().nbytes();
  }
  return n;
}

int64_t Trainer::parameters() const {
  int64_t n = 0;
  for (Gpt* c : chunks_) n += c->layout().total();
  return n;
}

Tensor Trainer::full_master(int j) {
  AdamW& o = *opt_[j];
  Backend& be = chunks_[j]->backend();
  Tensor state = o.master_state();
  if (!cfg_.zero) return to_host(be, state);
  Tensor full = be.empty({chunks_[j]->layout().total()}, DType::F32);
  if (store_) {
    store_->gather_all(state, full);
    return to_host(be, full);
  }
  be.fill(full, 0);
  int64_t at = 0;
  for (const FlatRange& r : o.owned()) {
    Tensor dst = full.view(r.begin, {r.size()});
    be.copy(dst, state.view(at, {r.size()}));
    at += r.size();
  }
  sync_[j]->gather_params(full);
  return to_host(be, full);
}

IterStats Trainer::step() {
  IterStats st;
  st.iteration = ++iteration_;
  const auto t0 = Clock::now();
  for (Gpt* c : chunks_) c->zero_grads();
  if (store_) store_->zero_grads();
  link_->reset_counters();
  double loss_sum = 0;
  run_schedule(actions_, data_, (iteration_ - 1) * cfg_.global_batch, false, st, loss_sum);
  st.pipeline_ms = ms_since(t0);
  st.p2p_bytes = link_->bytes_sent();
  st.p2p_wait_ms = link_->wait_ms();
  reduce_and_update(st, loss_sum);
  sum_scalar(groups_.pp, loss_sum);  // the loss lives on the last stage
  sum_scalar(grad_group(), loss_sum);  // each data-parallel and context-parallel rank's tokens
  st.loss = loss_sum / (double(cfg_.global_batch) * chunk(0).config().seq_length);
  st.time_ms = ms_since(t0);
  return st;
}

double Trainer::evaluate(const SampleSource& data, int64_t first_sample, int iters) {
  PTDP_CHECK(iters >= 0, "evaluate: {} iterations", iters);
  if (eval_actions_.empty())
    for (const Action& a : actions_)
      if (a.op == Op::RecvForward || a.op == Op::Forward || a.op == Op::SendForward) eval_actions_.push_back(a);
  double loss_sum = 0;
  for (int i = 0; i < iters; ++i) {
    IterStats unused;
    run_schedule(eval_actions_, data, first_sample + int64_t(i) * cfg_.global_batch, true, unused, loss_sum);
  }
  sum_scalar(groups_.pp, loss_sum);  // the loss lives on the last stage
  sum_scalar(grad_group(), loss_sum);
  return iters > 0 ? loss_sum / (double(iters) * cfg_.global_batch * chunk(0).config().seq_length) : 0.0;
}

}  // namespace ptdp
