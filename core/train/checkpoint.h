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
// another save (another run's, or a stale one left in the directory) is refused on load.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/gpt.h"
#include "core/optim/adamw.h"

namespace ptdp {

// What a shard must agree on with the run that loads it.
struct CheckpointLayout {
  int tp = 1, pp = 1, vpp = 1;
  int tp_rank = 0, pp_rank = 0;
  int layers = 0, hidden = 0, heads = 0, seq_length = 0;
  int64_t vocab_size = 0;
  uint64_t seed = 0;
  int64_t global_batch = 0;
  int zero = 0, dp = 1, dp_rank = 0;  // dp and dp_rank matter when zero > 0
  // The architecture (--arch) and the MLP hidden size (ModelConfig::ffn_hidden(): per gate and
  // up for llama); ffn_hidden must be set (positive) to save or load.
  Arch arch = Arch::Gpt;
  int ffn_hidden = 0;
  // --zero 1: the gradient bucket size (--grad-bucket-size), which lays out each rank's pieces.
  int64_t bucket_elems = 0;
  // Key/value heads (ModelConfig::groups(): --num-query-groups, or heads); 0 means heads.
  int query_groups = 0;
  // ModelConfig::layernorm_eps (--norm-epsilon) and ::rope_theta: a load with others is refused.
  double norm_eps = 1e-5, rope_theta = 10000;
  // Layers of the first and the last pipeline stage as placed (stage_layer_count, even split or
  // --decoder-first/last-pipeline-num-layers; the middle stages share the rest evenly); 0 means an
  // even split of `layers` over `pp`.
  int first_stage_layers = 0, last_stage_layers = 0;
  // A hash of --pipeline-model-parallel-layout (pipeline_layout_hash), 0 without one: a load under
  // another layout is refused.
  uint32_t layout_hash = 0;
};

// The hash a checkpoint keeps of a layout as canonical_layout spells it ("E1|2|2|1L"); never 0.
uint32_t pipeline_layout_hash(const std::string& canonical);

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
// The latest complete iteration in dir (and, given `save_id`, the id its manifest holds);
// UsageError naming --load and the file when absent or malformed.
int64_t read_latest(const std::string& dir, uint64_t* save_id = nullptr);
// Loads this rank's shard of `iteration` into the chunks and optimizers. UsageError when the
// shard is missing, corrupt or truncated, saved under another layout (names the field, both
// values and the file), or belongs to another save than `save_id` (read_latest's).
CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& layout,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts, uint64_t save_id);

}  // namespace ptdp
