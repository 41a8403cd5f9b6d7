#include "core/train/run.h"

#include "core/backend/attention_choice.h"
#include "core/backend/backend.h"
#include "core/train/rank_phase.h"

namespace ptdp {

namespace {

// The trainer's settings of a run.
TrainConfig train_config(const RunConfig& c) {
  TrainConfig tc;
  tc.micro_batch = c.par.micro_batch;
  tc.global_batch = c.par.global_batch;
  tc.recompute = c.par.recompute;
  tc.optimizer = c.opt;
  tc.optimizer.lr.batch = c.par.global_batch;  // Megatron's scheduler counts samples
  tc.overlap_grad_reduce = c.overlap_grad_reduce;
  tc.grad_reduce_bf16 = c.grad_reduce_bf16;
  tc.grad_bucket_elems = c.grad_bucket_elems;
  tc.schedule = c.par.schedule;
  tc.scatter_gather = c.par.scatter_gather;
  tc.skip_nonfinite = c.skip_nonfinite;
  tc.loss_scale = loss_scale_config(c);
  tc.zero = c.par.zero;
  return tc;
}

}  // namespace

TrainingRun::TrainingRun(const RunConfig& c, Backend& backend, Communicator& world, Communicator& launched,
                         RunOptions o)
    : c_(c),
      backend_(backend),
      world_(world),
      launched_(launched),
      o_(std::move(o)),
      groups_(ParallelGroups::create(world, Topology(c.par.tp, c.par.pp, c.par.dp, c.par.cp))) {}

TrainingRun::~TrainingRun() = default;

void TrainingRun::phase(const std::function<void()>& fn) { rank_phase(launched_, fn); }

void TrainingRun::set_up_data() { data_ = set_up_run_data(c_, launched_, rank0(), o_.log); }

void TrainingRun::build() {
  const ParallelGroups& g = groups_;
  model_ = build_stage_model(c_.model, c_.par.tp, g.me.tp, g.me.pp, c_.par.layer_split(c_.model.layers), backend_,
                             g.tp.get(), c_.seed, precision_dtype(c_.precision), c_.par.sequence_parallel);
  ContextParallel cp;
  cp.group = g.cp.get();
  cp.size = c_.par.cp;
  cp.rank = g.me.cp;
  cp.comm = c_.par.cp_comm;
  // Block attention: what --attention-backend resolves to on this backend (attention_choice.h: auto
  // is cuDNN where it runs this rank's blocks, else unfused), and always under context parallelism.
  const ModelConfig& m = c_.model;
  const AttentionShape shape{c_.par.micro_batch, m.seq_length, m.heads / c_.par.tp, m.groups() / c_.par.tp,
                             m.head_dim(), precision_dtype(c_.precision)};
  attention_ = configure_attention(backend_, c_.attention_backend, cp.size, shape);
  for (Gpt* chunk : model_.pointers()) {
    chunk->set_attention(attention_.blocks, cp);
    chunk->set_recompute_activation(c_.par.recompute_activation);
  }
  TrainerGroups tg{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get(), &world_};
  tg.cp = g.cp.get();
  tg.dp_cp = g.dp_cp.get();
  trainer_ = std::make_unique<Trainer>(model_.pointers(), *data_.train, train_config(c_), tg);
  ckpt_ = checkpoint_layout();
  draw_save_id();
}

IterStats TrainingRun::step() {
  // The iteration's time, bubble and activations of the slowest rank, and a stop request
  // (SIGINT/SIGTERM) of any rank: every rank sees it after the same iteration.
  if (!worst_.defined()) worst_ = Tensor::empty({4}, DType::F64);
  Tensor& worst = worst_;
  IterStats st;
  try {
    st = trainer_->step();
    // An iteration lasts as long as its slowest rank; bubble and activations: the worst stage.
    worst.data<double>()[0] = st.time_ms;
    worst.data<double>()[1] = st.bubble_fraction();
    worst.data<double>()[2] = double(st.peak_activation_bytes);
    worst.data<double>()[3] = double(o_.stop_signal ? o_.stop_signal() : 0);
    world_.all_reduce(worst, ReduceOp::Max);
  } catch (const std::exception& e) {
    stop_others_if_processes(launched_, e);
    throw;
  }
  st.time_ms = worst.data<double>()[0];
  bubble_ = worst.data<double>()[1];
  st.peak_activation_bytes = int64_t(worst.data<double>()[2]);
  stop_ = int(worst.data<double>()[3]);
  return st;
}

void TrainingRun::record(int it, const IterStats& st) {
  last_ = it;
  if (it - start_ > c_.warmup || it == c_.iters) {  // a resumed run times at least its last iteration
    timed_.push_back(st);
    bubbles_.push_back(bubble_);
  }
  if (it - start_ == c_.warmup && it < c_.iters) backend_.profile_restart();  // PTDP_OP_PROFILE: timed iterations only
  loss_ = st.loss;
  if (o_.keep_history || !c_.loss_log.empty()) history_.emplace_back(it, st);
}

void TrainingRun::train() {
  if (o_.log) o_.log->started(*this);
  worst_ = Tensor::empty({4}, DType::F64);
  last_ = start_;
  // Evaluations done before this run (a resumed run continues the valid samples where they were,
  // as Megatron-LM's consumed_valid_samples).
  evaluations_ = c_.eval_interval > 0 ? start_ / c_.eval_interval : 0;
  for (int it = start_ + 1; it <= c_.iters; ++it) {
    const IterStats st = step();
    record(it, st);
    if (o_.log) o_.log->iteration(*this, it, st, bubble_);
    if (data_.valid && c_.eval_interval > 0 && it % c_.eval_interval == 0) evaluate(it, false);
    const bool saves = !c_.save_dir.empty() && ((c_.save_interval > 0 && it % c_.save_interval == 0) || it == c_.iters);
    if (saves || (stop_ != 0 && !c_.save_dir.empty() && it < c_.iters)) save(it);
    if (stop_ != 0 && it < c_.iters) {
      stopped_by_ = stop_;
      if (o_.log) o_.log->stopped(stop_, it);
      break;
    }
  }
}

// The mean loss of eval_iters global batches of `source` from sample `first_sample`; a failing
// rank ends the others with its cause.
double TrainingRun::loss_on(const SampleSource& source, int64_t first_sample) {
  try {
    return trainer_->evaluate(source, first_sample, c_.eval_iters);
  } catch (const std::exception& e) {
    stop_others_if_processes(launched_, e);
    throw;
  }
}

void TrainingRun::evaluate(int it, bool after_training) {
  const double loss = loss_on(*data_.valid, evaluations_ * c_.eval_iters * c_.par.global_batch);
  ++evaluations_;
  valid_loss_ = loss;
  if (o_.log) o_.log->evaluated(it, after_training, loss);
}

void TrainingRun::evaluate_after_training() {
  if (last_ != c_.iters) return;  // not after a stop request
  if (data_.valid) evaluate(last_, true);
  if (data_.test) {
    const double loss = loss_on(*data_.test, 0);
    if (o_.log) o_.log->tested(last_, loss);
  }
}

}  // namespace ptdp
