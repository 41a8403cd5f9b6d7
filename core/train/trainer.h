// The training loop of one rank holding the whole model: each iteration runs the global batch
// as micro-batches (gradients accumulate), then one optimizer step.
#pragma once
#include <cstdint>
#include <memory>

#include "core/data/samples.h"
#include "core/model/gpt.h"
#include "core/optim/adamw.h"

namespace ptdp {

struct TrainConfig {
  int micro_batch = 1;
  int global_batch = 1;
  Recompute recompute = Recompute::None;
  OptimizerConfig optimizer;
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
  Trainer(Gpt& model, const SampleSource& data, const TrainConfig& cfg);
  IterStats step();
  int num_microbatches() const { return cfg_.global_batch / cfg_.micro_batch; }
  AdamW& optimizer() { return *opt_; }

 private:
  Gpt& model_;
  const SampleSource& data_;
  TrainConfig cfg_;
  std::unique_ptr<AdamW> opt_;
  int64_t iteration_ = 0;
};

// Copies b samples starting at sample index `first` into token and target tensors [b*s].
void load_microbatch(const SampleSource& data, int64_t first, int b, Tensor& tokens, Tensor& targets);

}  // namespace ptdp
