// `ptdp train`'s lines on world rank 0: what a training run tells as it goes (core/train/run_log.h)
// in ptdp's form or, with --log-format megatron, as Megatron-LM's training_log and evaluation
// reports; and the closing lines made from the run's summary.
#pragma once
#include <memory>

#include "core/config/run_config.h"
#include "core/results/tensorboard.h"
#include "core/train/run_log.h"
#include "core/train/run_summary.h"

namespace ptdp {

class TrainLog final : public RunLog {
 public:
  // rank_threads: the CPU threads each rank runs on.
  // With --tensorboard-dir, creates the event file (TensorBoardWriter; UsageError naming the flag).
  TrainLog(const RunConfig& c, int rank_threads);
  void split_ready(MegatronSplit which, const MegatronSamples& samples, int64_t requested) override;
  void test_split_skipped(const std::string& error) override;
  void checkpoint_without_loss_scaler(double initial_scale) override;
  void loaded(int64_t iteration) override;
  void no_checkpoint_to_load() override;
  void saved(int64_t iteration) override;
  void saved_initial() override;
  void started(const TrainingRun& run) override;
  void iteration(const TrainingRun& run, int iteration, const IterStats& st, double bubble) override;
  void evaluated(int iteration, bool after_training, double loss) override;
  void tested(int iteration, double loss) override;
  void stopped(int signal, int iteration) override;
  void loss_log_written(size_t iterations) override;

  void no_timed_iteration() const;  // stopped within --warmup: no result row
  // The median step, memory and bubble; --gemm-rate's comparison with sgemm; the state per rank.
  void summary(const RunSummary& s, double peak_gb) const;

 private:
  // The iterations since the last progress line, for --log-format megatron: Megatron-LM's
  // training_log averages the time over them and the loss over those that updated, and counts the
  // skipped and non-finite ones.
  struct Interval {
    int iterations = 0, advanced = 0, skipped = 0, nan = 0;
    double time_ms = 0, loss = 0, grad_norm = 0, lr = 0;
    void add(const IterStats& st);
  };

  void progress_line(const TrainingRun& run, int iteration, const IterStats& st, double bubble);
  void megatron_line(const TrainingRun& run, int iteration, const IterStats& st);
  // Megatron's training_log scalars of this iteration, every --tensorboard-log-interval.
  void tensorboard_iteration(const TrainingRun& run, int iteration, const IterStats& st);
  void tensorboard_timers(int iteration);
  void tensorboard_evaluation(int iteration, double loss);
  double interval_seconds() const;  // the interval's mean iteration time
  // Megatron's num_floating_point_operations per second per GPU, in TFLOP/s.
  double megatron_tflops(double per_iter_s) const;
  // The learning rate after the iteration's step (what Megatron's optimizer holds then).
  double next_lr(const TrainingRun& run) const;
  // The loss scale as Megatron's optimizer reports it: f16's (constant or dynamic), else 1.
  double loss_scale(const TrainingRun& run) const;

  const RunConfig& c_;
  int rank_threads_;
  Interval interval_;
  bool first_line_ = true;   // Megatron prints the run's first iteration whatever the interval
  bool loss_seen_ = false;   // Megatron prints "lm loss" once an iteration has updated
  std::unique_ptr<TensorBoardWriter> tb_;
};

// On stderr, whatever the verbosity: timed iterations that skipped the optimizer step measure
// less than a step.
void warn_skipped_updates(const RunSummary& s);

}  // namespace ptdp
