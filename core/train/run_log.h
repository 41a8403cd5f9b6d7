// What a training run (core/train/run.h) tells as it goes, for a log to print (`ptdp train`'s
// progress lines: experiments/train_log.h); a run without one tells nothing. Only world rank 0's
// run has a log, and it calls each event where the run reaches it.
#pragma once
#include <cstdint>
#include <string>

#include "core/data/megatron_samples.h"

namespace ptdp {

class TrainingRun;
struct IterStats;

class RunLog {
 public:
  virtual ~RunLog() = default;
  // --data-order megatron: a split's samples, built for `requested` samples.
  virtual void split_ready(MegatronSplit which, const MegatronSamples& samples, int64_t requested) = 0;
  // The test split is not evaluated: `error` says why, empty when --split gives it no share.
  virtual void test_split_skipped(const std::string& error) = 0;
  // --load: the f16 run's checkpoint holds no loss-scaler state (f16 starts at this scale).
  virtual void checkpoint_without_loss_scaler(double initial_scale) = 0;
  virtual void loaded(int64_t iteration) = 0;
  // --load is --save and holds no checkpoint yet: the run starts from its initial weights.
  virtual void no_checkpoint_to_load() = 0;
  virtual void saved(int64_t iteration) = 0;  // --save's checkpoint
  virtual void saved_initial() = 0;          // --save-init's
  // Before the first iteration: the run, its model, layout and optimizer.
  virtual void started(const TrainingRun& run) = 0;
  // `iteration` done: st holds the slowest rank's time and this rank's breakdown; bubble is the
  // worst stage's.
  virtual void iteration(const TrainingRun& run, int iteration, const IterStats& st, double bubble) = 0;
  // An evaluation of the valid split after `iteration` (after_training: the one after the last).
  virtual void evaluated(int iteration, bool after_training, double loss) = 0;
  virtual void tested(int iteration, double loss) = 0;  // the test split's, after training
  virtual void stopped(int signal, int iteration) = 0;  // a stop request ended the run early
  virtual void loss_log_written(size_t iterations) = 0;
};

}  // namespace ptdp
