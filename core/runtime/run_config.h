// RunConfig: everything one run is made of (model, parallel layout, run settings), shared by
// `ptdp train` and `ptdp simulate`; validate() checks it and fills derived defaults.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/config.h"
#include "core/model/layer.h"
#include "core/optim/adamw.h"

namespace ptdp {

struct ParallelConfig {
  int tp = 1, pp = 1;
  int dp = 0;   // 0: inferred from the number of ranks, as Megatron does
  int vpp = 1;  // model chunks per pipeline stage (interleaved schedule)
  int micro_batch = 1;
  int global_batch = 0;  // 0: micro_batch * dp
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved
  Recompute recompute = Recompute::None;
  bool scatter_gather = true;
  int num_microbatches() const { return global_batch / (micro_batch * dp); }
};

struct RunConfig {
  ModelConfig model;
  ParallelConfig par;
  std::string experiment = "train";
  std::string backend = "cpu";   // cpu | cuda
  std::string comm = "local";    // local | mpi | nccl
  int ranks = 0;                 // 0: tp * pp * dp
  std::string precision = "f32"; // f32 | bf16 | f16
  int iters = 10;                // training iterations in all
  int warmup = 1;                // of which the first `warmup` are not timed
  uint64_t seed = 1234;
  OptimizerConfig opt;
  std::string data = "synthetic";  // synthetic | a dataset prefix (PREFIX.bin/.idx)
  std::string csv;                 // result file; empty: none
  int log_interval = 1;
  bool overlap_grad_reduce = false;          // data-parallel all-reduce during backward
  int64_t grad_bucket_elems = 40'000'000;    // data-parallel bucket size in elements
  double comm_timeout_s = 300;               // a rank waiting longer for another stops the run
  std::string save_dir, load_dir;            // checkpoints (--save, --load)
  int save_interval = 0;                     // 0: save at the end only
  bool skip_nonfinite = false;               // skip steps with non-finite loss/gradients
};

// Checks every rule of the flags (throws UsageError naming the flag and the rule) and fills
// defaults: dp (from ranks), global_batch, ranks.
void validate_run(RunConfig& c);
// What this build can run: refuses, with a UsageError, what is not implemented yet.
void require_supported(const RunConfig& c);

}  // namespace ptdp
