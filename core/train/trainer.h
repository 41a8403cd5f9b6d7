// The training loop of one rank: each iteration runs this data-parallel rank's share of the
// global batch as micro-batches (gradients accumulate), sums the gradients over the
// data-parallel group, then takes one optimizer step (gradient norm over the model-parallel
// group). Holds the whole model or a tensor-parallel slice of it (one pipeline stage).
#pragma once
#include <cstdint>
#include <memory>

#include "core/data/samples.h"
#include "core/model/gpt.h"
#include "core/optim/adamw.h"
#include "core/parallel/grad_sync.h"

namespace ptdp {

struct TrainConfig {
  int micro_batch = 1;
  int global_batch = 1;
  Recompute recompute = Recompute::None;
  OptimizerConfig optimizer;
  int64_t grad_bucket_elems = 40'000'000;  // data-parallel all-reduce bucket (Megatron's default)
  bool overlap_grad_reduce = false;        // start each bucket's all-reduce during backward
};

// This rank's place in the data-parallel and model-parallel groups (null: alone).
struct TrainerGroups {
  Communicator* dp = nullptr;
  Communicator* mp = nullptr;
};

struct IterStats {
  int64_t iteration = 0;    // 1-based
  double loss = 0;          // mean per-token loss over the global batch (before the update)
  double time_ms = 0;       // wall time of the whole iteration
  double fwd_ms = 0, bwd_ms = 0, opt_ms = 0;
  double grad_norm = 0, lr = 0;
  int64_t peak_activation_bytes = 0;  // largest sum of live micro-batch caches
};

class Trainer {
 public:
  Trainer(Gpt& model, const SampleSource& data, const TrainConfig& cfg, const TrainerGroups& groups = {});
  IterStats step();
  int dp_size() const { return groups_.dp ? groups_.dp->size() : 1; }
  int dp_rank() const { return groups_.dp ? groups_.dp->rank() : 0; }
  int num_microbatches() const { return cfg_.global_batch / (cfg_.micro_batch * dp_size()); }
  AdamW& optimizer() { return *opt_; }

 private:
  Gpt& model_;
  const SampleSource& data_;
  TrainConfig cfg_;
  TrainerGroups groups_;
  std::unique_ptr<AdamW> opt_;
  std::unique_ptr<GradSync> sync_;
  int64_t iteration_ = 0;
};

// Copies b samples starting at sample index `first` into token and target tensors [b*s].
void load_microbatch(const SampleSource& data, int64_t first, int b, Tensor& tokens, Tensor& targets);

}  // namespace ptdp
