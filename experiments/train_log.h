// `ptdp train`'s lines on world rank 0: what a training run tells as it goes (core/train/run_log.h)
// in ptdp's form or, with --log-format megatron, as Megatron-LM's training_log and evaluation
// reports; and the closing lines made from the run's summary.
#pragma once
#include "core/config/run_config.h"
#include "core/train/run_log.h"
#include "core/train/run_summary.h"

namespace ptdp {

class TrainLog final : public RunLog {
 public:
  // rank_threads: the CPU threads each rank runs on.
  TrainLog(const RunConfig& c, int rank_threads) : c_(c), rank_threads_(rank_threads) {}
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

  const RunConfig& c_;
  int rank_threads_;
  Interval interval_;
};

// On stderr, whatever the verbosity: timed iterations that skipped the optimizer step measure
// less than a step.
void warn_skipped_updates(const RunSummary& s);

}  // namespace ptdp
