// One rank's training run, as `ptdp train` makes it from a RunConfig, in named phases that every
// rank calls in this order (they hold collectives): lock the checkpoint directories, set up the
// data, build the stage's model and trainer, restore a checkpoint or initialise, the step loop
// (evaluating and saving as asked, until --iters or a stop request), evaluate after training,
// write the loss log, summarise what was measured. A phase that can fail on one rank alone runs as
// a rank phase (core/train/rank_phase.h); world rank 0 holds the locks and writes the shared files.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/backend/attention_choice.h"
#include "core/comm/communicator.h"
#include "core/config/run_config.h"
#include "core/parallel/topology.h"
#include "core/results/output_files.h"
#include "core/train/checkpoint.h"
#include "core/train/run_data.h"
#include "core/train/run_log.h"
#include "core/train/run_summary.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"

namespace ptdp {

struct RunOptions {
  RunLog* log = nullptr;             // world rank 0's log; null: the run tells nothing
  std::function<int()> stop_signal;  // a stop request this process received (the signal), 0: none
  bool keep_history = false;         // keep every iteration's statistics (history()); --loss-log does
};

class TrainingRun {
 public:
  // c: validated (validate_run). backend and world: this rank's, the world being the one its
  // backend's tensors travel through; launched: the world as launched (MPI processes or thread
  // ranks), for agreement, aborts and the save id. Splits world into the parallel groups.
  TrainingRun(const RunConfig& c, Backend& backend, Communicator& world, Communicator& launched, RunOptions o = {});
  ~TrainingRun();

  // The phases, in order.
  void lock_checkpoint_dirs();     // one run per --save/--save-init directory: a second is refused
  void set_up_data();
  void build();                    // the stage's model chunks and the trainer
  void restore_or_initialise();    // --load's checkpoint, or --save-init's initial weights
  void train();                    // iterations until --iters or a stop request
  void evaluate_after_training();  // not after a stop request
  void write_loss_log();           // --loss-log (world rank 0)
  RunSummary summarise() const;    // after at least one timed iteration

  // One iteration of the step loop on every rank (or of a caller that times steps itself): the
  // trainer's step, then one all-reduce for the slowest rank's time, the worst stage's bubble and
  // activations, and any rank's stop request.
  IterStats step();

  const RunConfig& config() const { return c_; }
  const Trainer& trainer() const { return *trainer_; }
  const RunData& data() const { return data_; }
  const AttentionPlan& attention() const { return attention_; }  // after build()
  bool rank0() const { return world_.rank() == 0; }
  int iterations() const { return last_; }        // the last iteration run
  int stopped_by() const { return stopped_by_; }  // the stop request that ended the run, 0: none
  int timed_iterations() const { return int(timed_.size()); }
  // Every iteration's statistics, with keep_history or --loss-log.
  const std::vector<std::pair<int, IterStats>>& history() const { return history_; }

 private:
  void phase(const std::function<void()>& fn);  // a rank phase of launched
  void record(int it, const IterStats& st);
  void evaluate(int it, bool after_training);
  double loss_on(const SampleSource& source, int64_t first_sample);
  CheckpointLayout checkpoint_layout() const;
  void draw_save_id();
  uint64_t save_id_of(int64_t iteration) const;
  void restore();
  bool first_run_of_save_dir() const;
  void save_initial();
  void save(int it);
  void write_checkpoint(const std::string& dir, const CheckpointState& st);

  const RunConfig c_;
  Backend& backend_;
  Communicator& world_;
  Communicator& launched_;
  RunOptions o_;
  ParallelGroups groups_;
  std::vector<std::unique_ptr<DirLock>> dir_locks_;
  RunData data_;
  StageModel model_;
  AttentionPlan attention_;
  std::unique_ptr<Trainer> trainer_;
  CheckpointLayout ckpt_;
  uint64_t run_id_ = 0;  // this run's saves, drawn on world rank 0
  int start_ = 0;        // the iteration it starts after (--load)
  int last_ = 0;
  int stopped_by_ = 0;
  Tensor worst_;         // step(): the all-reduced maxima
  double bubble_ = 0;    // step(): the worst stage's bubble of the last iteration
  int stop_ = 0;         // step(): any rank's stop request
  double loss_ = 0;      // the last iteration's
  std::vector<IterStats> timed_;
  std::vector<double> bubbles_;
  std::vector<std::pair<int, IterStats>> history_;
  int64_t evaluations_ = 0;  // evaluations of the valid split done, those before a --load included
  std::optional<double> valid_loss_;
};

}  // namespace ptdp
