// The training loop of one rank. Each iteration runs this data-parallel rank's share of the
// global batch as m micro-batches through the pipeline schedule of its stage (activations
// and gradients to and from the neighbouring stages), sums the tied embedding's gradient over
// the first and last stage, sums the gradients over the data-parallel group, and takes one
// optimizer step with the gradient norm of the whole model (over the model-parallel group).
// With zero = 1 (Megatron's distributed optimizer) the data-parallel sum is a reduce-scatter,
// each data-parallel rank updates its piece of every bucket, and the updated parameters are
// all-gathered. With zero = 3 (DeepSpeed's ZeRO-3; t = p = 1) the parameters are sharded too:
// the model gathers each unit before its forward and again before its backward, and each
// unit's gradients are reduce-scattered after its backward (core/parallel/sharded_params.h).
// One stage holds v model chunks (interleaved schedule) or one; each may be a
// tensor-parallel slice. With context parallelism (the chunks' Gpt::set_attention) every rank of a
// context-parallel group reads the micro-batches of its data-parallel rank and keeps its chunks'
// tokens; gradients are reduced (and sharded) over data and context ranks together, and the
// loss is summed over both.
#pragma once
#include <cstdint>
#include <map>
#include <memory>

#include "core/data/samples.h"
#include "core/model/gpt.h"
#include "core/optim/adamw.h"
#include "core/optim/loss_scaler.h"
#include "core/parallel/grad_sync.h"
#include "core/parallel/schedule.h"
#include "core/parallel/sharded_params.h"
#include "core/parallel/stage_link.h"

namespace ptdp {

struct TrainConfig {
  int micro_batch = 1;
  int global_batch = 1;
  Recompute recompute = Recompute::None;
  OptimizerConfig optimizer;
  int64_t grad_bucket_elems = 40'000'000;  // data-parallel all-reduce bucket (Megatron's default)
  bool overlap_grad_reduce = false;        // start each bucket's all-reduce during backward
  bool grad_reduce_bf16 = false;           // the data-parallel sum in bf16 (grad_sync.h)
  int zero = 0;                            // 0, 1 or 3 (see the top of this file)
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  bool scatter_gather = true;
  // A non-finite loss or gradient stops training (RuntimeError naming the iteration and the
  // first rank that saw it) unless this is set: then the update is skipped.
  bool skip_nonfinite = false;
  // f16: dynamic loss scaling (an overflow skips the step and lowers the scale, whatever
  // skip_nonfinite says); f32 and bf16: a constant scale of 1.
  LossScaleConfig loss_scale;
};

// This rank's groups (null: alone in that dimension).
struct TrainerGroups {
  Communicator* dp = nullptr;
  Communicator* mp = nullptr;         // tensor x pipeline: one model replica
  Communicator* pp = nullptr;         // this pipeline; rank = stage
  Communicator* tp = nullptr;
  Communicator* embedding = nullptr;  // first and last stage (null elsewhere)
  Communicator* world = nullptr;      // every rank (to agree on non-finite values)
  // Context parallelism (c > 1): the group holding the other chunks of this rank's sequences, and
  // the data-and-context group over which gradients are reduced and sharded (Megatron-core's
  // dp-cp group; dp when null).
  Communicator* cp = nullptr;
  Communicator* dp_cp = nullptr;
};

struct IterStats {
  int64_t iteration = 0;  // 1-based
  double loss = 0;        // mean per-token loss over the global batch (before the update)
  double time_ms = 0;     // wall time of the whole iteration on this rank
  double fwd_ms = 0, bwd_ms = 0;  // compute
  double p2p_wait_ms = 0;         // blocked receiving from other stages
  double pipeline_ms = 0;         // the schedule, from its first action to its last
  double dp_ms = 0;               // data-parallel and embedding reductions after the schedule
  double opt_ms = 0;              // gradient norm and update
  double grad_norm = 0, lr = 0;
  int64_t p2p_bytes = 0;              // sent to other stages
  int64_t peak_activation_bytes = 0;  // most activation bytes stashed at once
  bool skipped = false;               // non-finite values: no update (skip_nonfinite or f16)
  double loss_scale = 1;              // the loss scale this iteration ran with
  // Measured bubble: time of the schedule not spent computing, over the compute time (the
  // paper's t_pb / t_id).
  double bubble_fraction() const {
    double compute = fwd_ms + bwd_ms;
    return compute > 0 ? std::max(0.0, pipeline_ms - compute) / compute : 0;
  }
};

class Trainer {
 public:
  // chunks: this stage's model chunks in chunk order (1, or v with the interleaved schedule);
  // stage and p come from groups.pp.
  Trainer(std::vector<Gpt*> chunks, const SampleSource& data, const TrainConfig& cfg,
          const TrainerGroups& groups = {});
  Trainer(Gpt& model, const SampleSource& data, const TrainConfig& cfg, const TrainerGroups& groups = {})
      : Trainer(std::vector<Gpt*>{&model}, data, cfg, groups) {}
  IterStats step();
  int dp_size() const { return groups_.dp ? groups_.dp->size() : 1; }
  int dp_rank() const { return groups_.dp ? groups_.dp->rank() : 0; }
  int stages() const { return groups_.pp ? groups_.pp->size() : 1; }
  int stage() const { return groups_.pp ? groups_.pp->rank() : 0; }
  int num_microbatches() const { return cfg_.global_batch / (cfg_.micro_batch * dp_size()); }
  // The group gradients are reduced and sharded over: data x context parallel (dp without c).
  Communicator* grad_group() const { return groups_.dp_cp ? groups_.dp_cp : groups_.dp; }
  AdamW& optimizer(int chunk = 0) { return *opt_[chunk]; }
  // Every rank's f32 master weights of chunk j, whole (a collective over the data-parallel
  // group when sharded).
  Tensor full_master(int chunk);
  // After the optimizer state was replaced (a checkpoint loaded): sharded, every rank's
  // updated pieces of the parameters to every rank (collective).
  void sync_params();
  // Bytes of weights, gradients and optimizer state allocated on this rank (not activations,
  // not ZeRO-3's gathered units), and the parameters they are for.
  int64_t state_bytes() const;
  int64_t parameters() const;
  const ShardedParams* sharded_params() const { return store_.get(); }  // zero = 3
  std::vector<AdamW*> optimizers() const;
  const std::vector<Gpt*>& chunks() const { return chunks_; }
  LossScaler& loss_scaler() { return scaler_; }
  const LossScaler& loss_scaler() const { return scaler_; }
  // Evaluation (Megatron's forward_only pass): `iters` global batches of `data`, the first
  // starting at sample `first_sample`, each split among the data-parallel ranks and run through
  // this stage's schedule with its backward passes left out. Returns the mean per-token loss over
  // them on every rank (collective over the pipeline and data-parallel groups); gradients,
  // optimizer state and the iteration count are left as they were.
  double evaluate(const SampleSource& data, int64_t first_sample, int iters);
  int64_t iteration() const { return iteration_; }        // iterations done
  void set_iteration(int64_t done) { iteration_ = done; }  // when resuming: the data position follows

 private:
  // The actions of one global batch starting at sample batch_start of data; forward_only keeps
  // no activations for a backward pass (the actions hold none).
  void run_schedule(const std::vector<Action>& actions, const SampleSource& data, int64_t batch_start,
                    bool forward_only, IterStats& st, double& loss_sum);
  void reduce_and_update(IterStats& st, double loss_sum);
  Gpt& chunk(int j) { return *chunks_[j]; }

  std::vector<Gpt*> chunks_;
  const SampleSource& data_;
  TrainConfig cfg_;
  TrainerGroups groups_;
  std::vector<Action> actions_;
  std::vector<Action> eval_actions_;  // the forward actions of actions_, in their order
  std::vector<std::unique_ptr<AdamW>> opt_;
  std::vector<std::unique_ptr<GradSync>> sync_;
  std::unique_ptr<StageLink> link_;
  std::unique_ptr<ShardedParams> store_;  // zero = 3
  LossScaler scaler_;
  int64_t iteration_ = 0;
};

// Copies b samples starting at sample index `first` into token and target tensors [b*s].
void load_microbatch(const SampleSource& data, int64_t first, int b, Tensor& tokens, Tensor& targets);
// Context parallelism: the rows of tokens or targets [b*s] at this rank's positions
// (cp_positions), [b*s/c]; x itself when c = 1.
Tensor context_rows(const Tensor& x, int b, int s, const ContextParallel& cp);

}  // namespace ptdp
