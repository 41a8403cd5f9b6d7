// The checkpoint phases of a training run (core/train/run.h): the directory locks, --load's
// restore, --save-init's initial weights and --save's checkpoints.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/comm/agreement.h"
#include "core/common/error.h"
#include "core/train/checkpoint_resume.h"
#include "core/train/run.h"

namespace ptdp {

// One run per checkpoint directory: world rank 0 (one per job, whether ranks are threads or
// processes) holds its lock for the whole run, so that a second run is refused at start.
void TrainingRun::lock_checkpoint_dirs() {
  phase([&] {
    if (!rank0()) return;
    std::vector<std::string> locked;
    for (const auto& [dir, flag] : {std::pair{c_.save_dir, "--save"}, std::pair{c_.save_init_dir, "--save-init"}}) {
      if (dir.empty()) continue;
      std::error_code ec;
      const std::string canon = std::filesystem::weakly_canonical(dir, ec).string();
      if (std::find(locked.begin(), locked.end(), canon) != locked.end()) continue;
      locked.push_back(canon);
      dir_locks_.push_back(std::make_unique<DirLock>(dir, flag));
    }
  });
}

CheckpointLayout TrainingRun::checkpoint_layout() const {
  // Sharded state is sharded over data and context ranks together: its file is numbered by the
  // rank in that group (the data-parallel rank without context parallelism).
  return ptdp::checkpoint_layout(c_, groups_.me.tp, groups_.me.pp, groups_.me.cp + c_.par.cp * groups_.me.dp);
}

// The id of this run's saves, drawn on world rank 0 and given to every rank: each save's shards
// and manifest carry it mixed with the iteration (checkpoint.h: a checkpoint is one unit).
void TrainingRun::draw_save_id() {
  if (c_.save_dir.empty() && c_.save_init_dir.empty()) return;
  Tensor id = Tensor::zeros({2}, DType::I32);
  if (rank0()) std::memcpy(id.raw(), &(run_id_ = new_save_id()), sizeof run_id_);
  launched_.broadcast(id, 0);
  std::memcpy(&run_id_, id.raw(), sizeof run_id_);
}

uint64_t TrainingRun::save_id_of(int64_t iteration) const {
  uint64_t x = run_id_ ^ (0x9E3779B97F4A7C15ull * uint64_t(iteration + 1));
  x ^= x >> 31;
  return x ? x : 1;
}

// Megatron-LM's scripts give --save and --load the same directory: on the first run it holds no
// checkpoint yet, and the run starts from its initial weights, as Megatron-LM's does.
bool TrainingRun::first_run_of_save_dir() const { return loads_an_empty_save_dir(c_); }

void TrainingRun::restore_or_initialise() {
  bool fresh = false;
  phase([&] { fresh = first_run_of_save_dir(); });
  if (launched_.backend() == "mpi" && !c_.load_dir.empty())
    require_same_fields(launched_, {{"whether --load " + c_.load_dir + " holds a checkpoint", fresh ? "no" : "yes"}},
                        "every rank must read the same checkpoint directory");
  if (fresh && o_.log) o_.log->no_checkpoint_to_load();
  if (!c_.load_dir.empty() && !fresh) restore();
  if (!c_.save_init_dir.empty()) save_initial();
}

void TrainingRun::restore() {
  int64_t it = 0;
  CheckpointState st;
  phase([&] {
    uint64_t id = 0;
    it = read_latest(c_.load_dir, &id);
    if (it >= c_.iters)
      usage_error("--load {}: the checkpoint is at iteration {}, not before --iters {}", c_.load_dir, it, c_.iters);
    st = load_shard(c_.load_dir, it, ckpt_, model_.pointers(), trainer_->optimizers(), id);
  });
  if (launched_.backend() == "mpi")
    require_same_fields(launched_, {{"the iteration of --load " + c_.load_dir, std::to_string(it)}},
                        "every rank must read the same checkpoint (one shared directory, or the same copy on every "
                        "node)");
  trainer_->sync_params();  // sharded: each rank loaded its pieces of the weights
  LossScaler& scaler = trainer_->loss_scaler();
  if (scaler.dynamic()) {
    if (st.loss_scale > 0) scaler.restore({st.loss_scale, st.scale_growth, st.scale_hysteresis});
    // Saved without dynamic loss scaling (f32, bf16): its scale of 1 is no f16 state.
    else if (o_.log) o_.log->checkpoint_without_loss_scaler(scaler.scale());
  }
  trainer_->set_iteration(it);
  start_ = static_cast<int>(it);
  if (o_.log) o_.log->loaded(it);
}

// Data-parallel and context-parallel rank 0 writes its (tp, pp) shard (sharded optimizer state:
// every rank of the data-and-context group its own); world rank 0 the marker, last.
void TrainingRun::write_checkpoint(const std::string& dir, const CheckpointState& st) {
  const bool writes_shard = (groups_.me.dp == 0 && groups_.me.cp == 0) || c_.par.zero > 0;
  phase([&] {
    if (writes_shard) save_shard(dir, ckpt_, st, model_.pointers(), trainer_->optimizers());
  });
  phase([&] {
    if (rank0()) write_latest(dir, st.iteration, st.save_id);
  });
}

void TrainingRun::save(int it) {
  const LossScaler& scaler = trainer_->loss_scaler();
  const LossScaler::State ls = scaler.state();
  // A loss scale of 0 in the checkpoint: no dynamic loss-scaler state (f32, bf16, fixed scale).
  write_checkpoint(c_.save_dir, CheckpointState{it, scaler.dynamic() ? ls.scale : 0.0, int32_t(ls.growth),
                                                int32_t(ls.hysteresis), save_id_of(it)});
  if (o_.log) o_.log->saved(it);
}

// The initial weights and zero optimizer state, as iteration 0.
void TrainingRun::save_initial() {
  write_checkpoint(c_.save_init_dir, CheckpointState{0, 1.0, 0, 0, save_id_of(0)});
  if (o_.log) o_.log->saved_initial();
}

}  // namespace ptdp
