// Checkpoints as Megatron lays them out: DIR/iter_0000100/mp_rank_TT[_PPP]/model_optim_rng.bin,
// one shard per (tensor, pipeline) rank (data-parallel rank 0 writes it), and
// DIR/latest_checkpointed_iteration.txt, written last. Every file is written atomically
// (temporary file, fsync, rename), so a run killed while saving leaves the previous
// checkpoint loadable. A shard holds the model chunks' f32 master weights (bf16/f16 weights are
// rounded from them on load), the AdamW state and step, the loss scaler's state, and the
// iteration (which fixes the data position and, with the seed, the RNG). With sharded data
// parallelism (--zero 1) every data-parallel rank writes its own file beside it,
// zero_dp_rank_DDD.bin, holding its pieces of the master weights and Adam state: such a
// checkpoint loads only with the same --zero and data-parallel size.
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
};

struct CheckpointState {
  int64_t iteration = 0;
  double loss_scale = 1.0;
  int32_t scale_growth = 0, scale_hysteresis = 0;  // the loss scaler's trackers
};

std::string shard_dir(const std::string& dir, int64_t iteration, int tp_rank, int pp_rank, int pp);

// Writes this rank's shard for `iteration` (atomically): data-parallel rank 0's, or every
// rank's when zero > 0.
void save_shard(const std::string& dir, const CheckpointLayout& layout, const CheckpointState& state,
                const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts);
// Marks `iteration` as the latest complete checkpoint (call after every shard is saved).
void write_latest(const std::string& dir, int64_t iteration);
// The latest complete iteration in dir; UsageError naming --load and the file when absent or
// malformed.
int64_t read_latest(const std::string& dir);
// Loads this rank's shard of `iteration` into the chunks and optimizers. UsageError when the
// shard is missing, corrupt or truncated, or saved under another layout (names both).
CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& layout,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts);

}  // namespace ptdp
