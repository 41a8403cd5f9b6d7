#include "experiments/train_log.h"

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include <fmt/format.h>

#include "core/accounting/flops.h"
#include "core/accounting/model_gemms.h"
#include "core/backend/cpu/gemm_rate.h"
#include "core/train/run.h"

namespace ptdp {

namespace {

// Each dataset of a Megatron order: its weight, the samples drawn and the epochs they make.
void print_dataset_uses(const MegatronSamples& ms) {
  for (const auto& u : ms.datasets())
    fmt::print("  {}: weight {:.4g}, {} samples drawn of {} built, {:.3g} epochs drawn ({} epochs indexed), index {} {}\n",
               u.prefix, u.weight, u.samples_drawn, u.samples_built, u.epochs_drawn, u.num_epochs,
               u.index_files_found ? "found in" : "built as", u.index_files);
  if (!ms.blend_index_files().empty()) fmt::print("  blend index: {}\n", ms.blend_index_files());
}

// Megatron-LM's evaluation report (training.py, evaluate_and_print_results): the line between two
// rules of its length; its perplexity is exp(min(20, loss)).
std::string megatron_evaluation_lines(const std::string& prefix, double loss) {
  const std::string line = fmt::format(" validation loss at {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} | ",
                                       prefix, loss, std::exp(std::min(20.0, loss)));
  const std::string rule(line.size() + 1, '-');
  return rule + "\n" + line + "\n" + rule + "\n";
}

// " (warm-up 10 iterations, cosine to 1e-05 at iteration 100)", " constant", ...
std::string schedule_text(const LrSchedule& s) {
  const double warm = s.warmup();
  const std::string warmup = s.warmup_fraction > 0
                                 ? fmt::format("warm-up {:g} iterations ({:g} of the decay)", warm, s.warmup_fraction)
                                 : fmt::format("warm-up {} iterations", s.warmup_iters);
  if (s.style == LrDecayStyle::Constant || s.decay_iters == 0)
    return warm > 0 ? fmt::format(" ({}, then constant)", warmup) : std::string(" constant");
  std::string decay = fmt::format("{} to {:g} at iteration {}", s.style, s.min_lr, s.decay_iters);
  if (s.style == LrDecayStyle::Wsd)
    decay += fmt::format(", annealed ({}) over its last {} iterations", s.wsd_style, s.wsd_decay_iters);
  return fmt::format(" ({}, {})", warmup, decay);
}

}  // namespace

TrainLog::TrainLog(const RunConfig& c, int rank_threads) : c_(c), rank_threads_(rank_threads) {}

double TrainLog::next_lr(const TrainingRun& run) const {
  LrSchedule s = c_.opt.lr;
  s.batch = c_.par.global_batch;
  const auto opts = run.trainer().optimizers();
  return opts.empty() ? 0.0 : s.at(opts.front()->steps_taken());
}

double TrainLog::loss_scale(const TrainingRun& run) const {
  return c_.precision == Precision::F16 ? run.trainer().loss_scaler().scale() : 1.0;
}

void TrainLog::Interval::add(const IterStats& st) {
  ++iterations;
  time_ms += st.time_ms;
  lr = st.lr;
  if (st.skipped) {  // Megatron counts a non-finite loss among the skipped iterations only
    ++skipped;
    if (!std::isfinite(st.loss)) ++nan;
    return;
  }
  ++advanced;
  loss += st.loss;
  grad_norm = st.grad_norm;
}

void TrainLog::split_ready(MegatronSplit which, const MegatronSamples& samples, int64_t requested) {
  const int64_t per_evaluation = int64_t(c_.eval_iters) * c_.par.global_batch;
  if (which == MegatronSplit::Train)
    fmt::print("data: Megatron-core's order, split train of --split {}, {} samples of {} tokens + 1, seed {}\n",
               c_.split, samples.num_samples(), c_.model.seq_length, c_.seed);
  else if (which == MegatronSplit::Valid)
    fmt::print("valid: split valid of --split {}, {} samples for {} evaluation(s) of {} x {} ({} in its index)\n",
               c_.split, requested, requested / per_evaluation, c_.eval_iters, c_.par.global_batch,
               samples.num_samples());
  else
    fmt::print("test: split test of --split {}, {} samples for one evaluation after training\n", c_.split, requested);
  print_dataset_uses(samples);
}

void TrainLog::test_split_skipped(const std::string& error) {
  if (error.empty()) fmt::print("test: --split {} gives the test split no share: not evaluated\n", c_.split);
  else fmt::print("test: not evaluated: {}\n", error);
}

void TrainLog::checkpoint_without_loss_scaler(double initial_scale) {
  fmt::print("note: the checkpoint in {} was saved without dynamic loss scaling; f16 starts at "
             "--initial-loss-scale {:g}\n",
             c_.load_dir, initial_scale);
}

void TrainLog::loaded(int64_t iteration) {
  fmt::print("loaded the checkpoint of iteration {} from {}\n", iteration, c_.load_dir);
}

void TrainLog::no_checkpoint_to_load() {
  fmt::print("no checkpoint in {} yet (--load is --save): starting from iteration 0, as Megatron-LM does\n",
             c_.load_dir);
}

void TrainLog::saved(int64_t iteration) {
  fmt::print("saved the checkpoint of iteration {} to {}\n", iteration, c_.save_dir);
}

void TrainLog::saved_initial() { fmt::print("saved the initial weights (iteration 0) to {}\n", c_.save_init_dir); }

namespace {

// The attention kernels that run, and the request where it was auto ("cudnn (auto)").
std::string attention_text(const RunConfig& c, const AttentionPlan& plan) {
  const std::string ran(enum_name(plan.kernels));
  return c.attention_backend == AttentionBackend::Auto ? ran + " (auto)" : ran;
}

}  // namespace

void TrainLog::started(const TrainingRun& run) {
  const RunConfig& c = c_;
  if (!c.tensorboard_dir.empty()) {
    tb_ = std::make_unique<TensorBoardWriter>(c.tensorboard_dir, "--tensorboard-dir");
    fmt::print("tensorboard: writing {} every {} iteration(s)\n", tb_->path(), c.tensorboard_log_interval);
  }
  const ModelConfig& m = c.model;
  fmt::print("ptdp train: model {} (l={} h={} a={} s={} V={}, {:.3g}M parameters), t={} p={} d={} on {} {} rank(s), "
             "v={} b={} B={} m={}, schedule {}, recompute {}, scatter/gather {}{}{}, backend {} {}{}, attention {}, {} "
             "iterations ({} untimed), data {}\n",
             m.name, m.layers, m.hidden, m.heads, m.seq_length, m.vocab_size, params_exact(m) / 1e6, c.par.tp,
             c.par.pp, c.par.dp, c.ranks, c.comm, c.par.vpp, c.par.micro_batch, c.par.global_batch,
             run.trainer().num_microbatches(), c.par.schedule, enum_name(c.par.recompute),
             c.par.scatter_gather && !c.par.sequence_parallel ? "on" : "off",
             std::string(c.par.sequence_parallel ? ", sequence parallel" : "") +
                 (c.par.cp > 1 ? fmt::format(", context parallel c={} ({})", c.par.cp, c.par.cp_comm) : ""),
             c.par.zero == 1   ? ", distributed optimizer (--zero 1)"
             : c.par.zero == 3 ? ", ZeRO-3"
                               : "",
             c.backend, c.precision,
             c.comm == CommKind::Local && c.backend == BackendKind::Cpu ? fmt::format(" ({} CPU thread(s) per rank)", rank_threads_) : "",
             attention_text(c, run.attention()), c.iters, c.warmup, c.data);
  if (!run.attention().note.empty()) fmt::print("note: {}\n", run.attention().note);
  const OptimizerConfig& o = c.opt;
  fmt::print("optimizer: AdamW lr {:g}{}, beta1 {:g} beta2 {:g} eps {:g}, weight decay {:g}, clip {:g}\n", o.lr.max_lr,
             schedule_text(o.lr), o.beta1, o.beta2, o.eps, o.weight_decay, o.clip_grad);
  if (run.data().valid && c.data == "synthetic")
    fmt::print("valid: another synthetic stream (seed {}), {} x {} samples per evaluation, {}after the last iteration\n",
               c.seed + 1, c.eval_iters, c.par.global_batch,
               c.eval_interval > 0 ? fmt::format("every {} iterations and ", c.eval_interval) : "");
}

namespace {

// The measured bubble as the paper defines it, t_pb/t_id: the schedule's idle time over its compute
// time, (p - 1)/m ideally, so more than 1 where m < p - 1 (8 stages, 2 micro-batches: 3.5). It is
// no fraction; the fraction of the schedule spent idle is t_pb/(t_pb + t_id), printed beside it.
std::string bubble_text(double b) {
  return fmt::format("bubble t_pb/t_id {:.3f} ({:.0f}% of the schedule idle)", b, 100.0 * b / (1.0 + b));
}

}  // namespace

void TrainLog::iteration(const TrainingRun& run, int it, const IterStats& st, double bubble) {
  const LossScaler& scaler = run.trainer().loss_scaler();
  if (st.skipped) {
    if (scaler.dynamic())
      fmt::print(" iteration {}: gradients overflowed at loss scale {:g}, update skipped; loss scale now {:g}\n", it,
                 st.loss_scale, scaler.scale());
    else
      fmt::print(" iteration {}: non-finite loss or gradients, update skipped\n", it);
  }
  interval_.add(st);
  if (tb_ && it % c_.tensorboard_log_interval == 0) tensorboard_iteration(run, it, st);
  const bool first = std::exchange(first_line_, false);
  if (c_.log_format == LogFormat::Megatron) {
    // Megatron-LM's training_log: a line every --log-interval iterations and after the run's first
    // iteration, which starts no new interval (the next line averages over it too).
    if (it % c_.log_interval != 0 && !first) return;
    megatron_line(run, it, st);
    if (tb_ && c_.log_timers_to_tensorboard && !first) tensorboard_timers(it);
    std::fflush(stdout);
    if (!first) interval_ = Interval{};
    return;
  }
  if (it % c_.log_interval == 0 || it == c_.iters) {
    progress_line(run, it, st, bubble);
    if (tb_ && c_.log_timers_to_tensorboard) tensorboard_timers(it);
    std::fflush(stdout);
    interval_ = Interval{};
  }
}

// Megatron-LM's training_log scalars (training.py): each beside its "vs samples" twin, whose
// step is the samples consumed.
void TrainLog::tensorboard_iteration(const TrainingRun& run, int it, const IterStats& st) {
  const int64_t samples = int64_t(it) * c_.par.global_batch;
  auto both = [&](const std::string& tag, double v) {
    tb_->add_scalar(tag, v, it);
    tb_->add_scalar(tag + " vs samples", v, samples);
  };
  both("learning-rate", next_lr(run));
  both("batch-size", double(c_.par.global_batch));
  both("lm loss", st.loss);
  if (c_.log_loss_scale_to_tensorboard) both("loss-scale", loss_scale(run));
  if (c_.log_world_size_to_tensorboard) both("world-size", double(c_.ranks));
  if (!st.skipped) both("grad-norm", st.grad_norm);  // Megatron has none for a skipped step
  tb_->flush();
}

// Megatron-LM's line (training.py, training_log: its keys, order, widths and units): the time per
// iteration and the loss averaged over the interval (the loss over the iterations that updated),
// the throughput its num_floating_point_operations per second per GPU, the learning rate and the
// loss scale as the optimizer holds them after the step.
void TrainLog::megatron_line(const TrainingRun& run, int it, const IterStats& st) {
  const RunConfig& c = c_;
  const Interval& i = interval_;
  const double per_iter_s = interval_seconds();
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&secs));
  const double tflops = megatron_tflops(per_iter_s);
  std::string line = fmt::format(" [{}.{:06d}] iteration {:8d}/{:8d} | consumed samples: {:12d} | elapsed time per "
                                 "iteration (ms): {:.1f} | throughput per GPU (TFLOP/s/GPU): {:.1f} | learning "
                                 "rate: {:.6E} | global batch size: {:5d} |",
                                 stamp, micros, it, c.iters, int64_t(it) * c.par.global_batch, per_iter_s * 1e3, tflops,
                                 next_lr(run), c.par.global_batch);
  loss_seen_ = loss_seen_ || i.advanced > 0;
  if (loss_seen_) line += fmt::format(" lm loss: {:.6E} |", i.loss / std::max(1, i.advanced));
  line += fmt::format(" loss scale: {:.1f} |", loss_scale(run));
  if (!st.skipped) line += fmt::format(" grad norm: {:.3f} |", st.grad_norm);
  line += fmt::format(" number of skipped iterations: {:3d} | number of nan iterations: {:3d} |", i.skipped, i.nan);
  fmt::print("{}\n", line);
}

double TrainLog::interval_seconds() const {
  return interval_.time_ms / std::max(1, interval_.iterations) / 1e3;
}

double TrainLog::megatron_tflops(double per_iter_s) const {
  return flops_megatron(c_.model, c_.par.global_batch, c_.par.tp) / (per_iter_s * 1e12 * c_.ranks);
}

// --log-timers-to-tensorboard: Megatron's "iteration-time" (seconds, averaged over the interval) and
// "throughput" (TFLOP/s per GPU), at each progress line but the first iteration's.
void TrainLog::tensorboard_timers(int it) {
  const double per_iter_s = interval_seconds();
  tb_->add_scalar("iteration-time", per_iter_s, it);
  tb_->add_scalar("throughput", megatron_tflops(per_iter_s), it);
  tb_->flush();
}

// ptdp's line.
void TrainLog::progress_line(const TrainingRun& run, int it, const IterStats& st, double bubble) {
  const RunConfig& c = c_;
  const LossScaler& scaler = run.trainer().loss_scaler();
  // A CPU run's throughput reads in GFLOP/s (0.005 TFLOP/s says little).
  const double flops_per_gpu = flops_eq3(c.model, c.par.global_batch) / (st.time_ms / 1e3) / c.ranks;
  const std::string rate = c.backend == BackendKind::Cpu ? fmt::format("{:7.2f} GFLOP/s", flops_per_gpu / 1e9)
                                              : fmt::format("{:7.3f} TFLOP/s", flops_per_gpu / 1e12);
  const double tokens = double(c.par.global_batch) * c.model.seq_length;
  fmt::print(" iteration {:>6}/{} | loss {:.4f} | {:9.2f} ms | {} | {:9.0f} tokens/s | lr {:.3e} | "
             "grad norm {:.3f} | fwd {:.1f} bwd {:.1f} p2p-wait {:.1f} dp {:.1f} opt {:.1f} ms | {}{}\n",
             it, c.iters, st.loss, st.time_ms, rate, tokens / (st.time_ms / 1e3), st.lr, st.grad_norm, st.fwd_ms,
             st.bwd_ms, st.p2p_wait_ms, st.dp_ms, st.opt_ms, bubble_text(bubble),
             scaler.dynamic() ? fmt::format(" | loss scale {:g}", scaler.scale()) : "");
}

// Megatron's evaluate_and_print_results scalars ("lm loss validation", its perplexity when asked),
// written for the test split's evaluation too, under the same names.
void TrainLog::tensorboard_evaluation(int it, double loss) {
  if (!tb_) return;
  const int64_t samples = int64_t(it) * c_.par.global_batch;
  const double ppl = std::exp(std::min(20.0, loss));
  tb_->add_scalar("lm loss validation", loss, it);
  tb_->add_scalar("lm loss validation vs samples", loss, samples);
  if (c_.log_validation_ppl_to_tensorboard) {
    tb_->add_scalar("lm loss validation ppl", ppl, it);
    tb_->add_scalar("lm loss validation ppl vs samples", ppl, samples);
  }
  tb_->flush();
}

void TrainLog::evaluated(int it, bool after_training, double loss) {
  tensorboard_evaluation(it, loss);
  if (c_.log_format == LogFormat::Megatron) {
    fmt::print("{}", megatron_evaluation_lines(
                         fmt::format("iteration {}{}", it, after_training ? " on validation set" : ""), loss));
  } else {
    fmt::print(" validation at iteration {:>6}{} | loss {:.6f} | ppl {:.6g} | {} x {} samples of the valid split\n", it,
               after_training ? " (after training)" : "", loss, std::exp(loss), c_.eval_iters, c_.par.global_batch);
  }
  std::fflush(stdout);
}

void TrainLog::tested(int it, double loss) {
  tensorboard_evaluation(it, loss);
  if (c_.log_format == LogFormat::Megatron)
    fmt::print("{}", megatron_evaluation_lines(fmt::format("iteration {} on test set", it), loss));
  else
    fmt::print(" test after iteration {:>6} | loss {:.6f} | ppl {:.6g} | {} x {} samples of the test split\n", it, loss,
               std::exp(loss), c_.eval_iters, c_.par.global_batch);
  std::fflush(stdout);
}

void TrainLog::stopped(int signal, int it) {
  fmt::print("stopped by {} after iteration {} of {}{}; writing what the iterations so far measured\n",
             signal == SIGINT    ? "SIGINT"
             : signal == SIGTERM ? "SIGTERM"
                                 : fmt::format("signal {}", signal),
             it, c_.iters, c_.save_dir.empty() ? "" : fmt::format(" (its checkpoint is in {})", c_.save_dir));
}

void TrainLog::loss_log_written(size_t iterations) {
  fmt::print("wrote the loss of {} iteration(s) to {}\n", iterations, c_.loss_log);
}

void TrainLog::no_timed_iteration() const {
  fmt::print("no timed iteration (stopped within --warmup {}): no result row\n", c_.warmup);
}

void TrainLog::summary(const RunSummary& s, double peak_gb) const {
  const RunConfig& c = c_;
  // peak_mem_gb's meaning (RankDevice::peak_gb): the CPU's over the thread ranks, rank 0's on a GPU.
  fmt::print("done: median iteration {:.2f} ms over {} timed iterations, final loss {:.4f}, peak memory {:.3f} GB "
             "{}, activations {:.4f} GB on the fullest stage, {}, {} bytes sent per iteration by rank 0\n",
             s.iter_ms, s.timed, s.loss, peak_gb, c.backend == BackendKind::Cuda ? "on rank 0" : "per rank",
             s.activation_gb, bubble_text(s.bubble), s.p2p_bytes);
  if (c.gemm_rate) {
    // Model FLOPs (recomputation not counted) per second of the median step, against sgemm over
    // the same GEMM shapes on this thread's CPU threads, timed now that training is done.
    const double step_gflops = flops_model(c.model, c.par.global_batch) / (s.iter_ms / 1e3) / 1e9;
    const double sgemm =
        cpu::sgemm_gflops(cpu::model_gemms(c.model, int64_t(c.par.micro_batch) * c.model.seq_length), 2.0);
    fmt::print("gemm rate: the step runs {:.1f} GFLOP/s of model FLOPs = {:.0f}% of sgemm at the model's shapes "
               "({:.1f} GFLOP/s, {} CPU thread(s))\n",
               step_gflops, 100.0 * step_gflops / sgemm, sgemm, rank_threads_);
  }
  fmt::print("model and optimizer state on rank 0: {} bytes for {} parameters ({:.3f} bytes per parameter: "
             "weights, gradients, master weights and Adam moments{})\n",
             s.state_bytes, s.parameters, double(s.state_bytes) / double(s.parameters),
             c.par.zero == 1   ? fmt::format(", the optimizer's sharded over d={}", c.par.dp)
             : c.par.zero == 3 ? fmt::format(", all sharded over d={}; at most {} bytes of gathered layers and their "
                                             "gradients at once",
                                             c.par.dp, s.gathered_bytes)
                               : std::string());
}

void warn_skipped_updates(const RunSummary& s) {
  if (s.skipped > 0)
    fmt::print(stderr,
               "ptdp: warning: {} of the {} timed iterations skipped the optimizer step (loss-scale overflow or "
               "non-finite gradients), so the timing leaves out their update; time more iterations, or start f16 from "
               "a lower --initial-loss-scale\n",
               s.skipped, s.timed);
}

}  // namespace ptdp
