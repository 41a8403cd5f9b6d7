// Checkpoints as Megatron lays them out: DIR/iter_0000100/mp_rank_TT[_PPP]/model_optim_rng.bin,
// one shard per (tensor, pipeline) rank (data-parallel rank 0 writes it), and
// DIR/latest_checkpointed_iteration.txt, written last. Every file is written atomically
// (temporary file, fsync, rename), so a run killed while saving leaves the previous
// checkpoint loadable. A shard holds the model chunks' f32 master weights (bf16/f16 weights are
// rounded from them on load), the AdamW state and step, the loss scaler's state, and the
// iteration (which fixes the data position and, with the seed, the RNG). With sharded data
// parallelism (--zero 1) every data-parallel rank writes its own file beside it,
// zero_dp_rank_DDD.bin, holding its pieces of the master weights and Adam state: such a
// checkpoint loads only with the same --zero, data-parallel size and (--zero 1: the pieces are
// chunks of the gradient buckets) --grad-bucket-size. A checkpoint is one unit: every shard and
// the save's manifest DIR/iter_NNNNNNN/save_id.txt carry the save's random id, and a shard of
// another save (another run's, or a stale one left in the directory) is refused on load. The
// shard's header names what it records ("name=value" lines: the state, then the run's recorded
// settings), so a setting recorded anew needs no new format (docs/PYTORCH.md).
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "core/config/config_fields.h"
#include "core/model/config.h"
#include "core/model/gpt.h"
#include "core/optim/adamw.h"

namespace ptdp {

// What a shard records of its run, and a resume must match: the configuration's recorded
// settings (config_fields.h: checkpoint_settings), the layers each stage holds as placed, and this
// rank's place; the file it goes to.
struct CheckpointLayout {
  std::vector<RecordedSetting> settings;  // compared in this order on load
  int tp_rank = 0, pp_rank = 0, pp = 1;
  int zero = 0, dp = 1, dp_rank = 0;  // with --zero every data-parallel rank writes its own file
};

// The layout of a shard of run `c` saved by the rank at (tp_rank, pp_rank, dp_rank).
CheckpointLayout checkpoint_layout(const RunConfig& c, int tp_rank, int pp_rank, int dp_rank);

struct CheckpointState {
  int64_t iteration = 0;
  double loss_scale = 1.0;
  int32_t scale_growth = 0, scale_hysteresis = 0;  // the loss scaler's trackers
  uint64_t save_id = 0;  // the save this shard belongs to (new_save_id), also in its manifest
};

// A fresh random id for one save (draw it on one rank and give it to all: every shard of a save
// carries the same id).
uint64_t new_save_id();

std::string shard_dir(const std::string& dir, int64_t iteration, int tp_rank, int pp_rank, int pp);

// Writes this rank's shard for `iteration` (atomically): data-parallel rank 0's, or every
// rank's when zero > 0.
void save_shard(const std::string& dir, const CheckpointLayout& layout, const CheckpointState& state,
                const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts);
// Marks `iteration` as the latest complete checkpoint (call after every shard is saved): writes
// the save's manifest (its id), then the marker.
void write_latest(const std::string& dir, int64_t iteration, uint64_t save_id);
// The file naming a directory's latest complete checkpoint (Megatron's name).
inline constexpr const char* kLatestCheckpointFile = "latest_checkpointed_iteration.txt";
// The latest complete iteration in dir (and, given `save_id`, the id its manifest holds);
// UsageError naming --load and the file when absent or malformed.
int64_t read_latest(const std::string& dir, uint64_t* save_id = nullptr);
// The settings the shard of `layout`'s rank of `iteration` records ("name", "value"), its state
// first, from its header alone; nullopt when that file is absent or its header unreadable
// (load_shard names why).
std::optional<std::vector<std::pair<std::string, std::string>>> recorded_settings(const std::string& dir,
                                                                                  int64_t iteration,
                                                                                  const CheckpointLayout& layout);
// Loads this rank's shard of `iteration` into the chunks and optimizers. UsageError when the
// shard is missing, corrupt or truncated, saved under another layout (names the field, both
// values and the file), or belongs to another save than `save_id` (read_latest's).
CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& layout,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts, uint64_t save_id);

}  // namespace ptdp
