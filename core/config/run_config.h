// RunConfig: everything one run is made of (model, parallel layout, run settings), shared by
// `ptdp train` and `ptdp simulate`; each member is a field of its struct's table (config_fields.h),
// and validate_run() checks it and fills derived defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/layer.h"
#include "core/model/layer_split.h"
#include "core/optim/adamw.h"
#include "core/config/settings.h"
#include "core/optim/loss_scaler.h"
#include "core/parallel/schedule.h"

namespace ptdp {

struct ParallelConfig {
  int tp = 1, pp = 1;
  // Context parallelism (--context-parallel-size, Megatron-core's): each sequence cut into 2*cp
  // chunks, rank i of a context-parallel group holding chunks i and 2*cp-1-i; attention exchanges
  // keys and values over the group as cp_comm says.
  int cp = 1;
  CpComm cp_comm = CpComm::P2P;
  int dp = 0;   // 0: inferred from the number of ranks, as Megatron does
  int vpp = 1;  // model chunks per pipeline stage (interleaved schedule)
  // Uneven stages (Megatron-core's --decoder-first-pipeline-num-layers and
  // --decoder-last-pipeline-num-layers): the first and last stages' layers; 0: an even share.
  int first_stage_layers = 0, last_stage_layers = 0;
  // Or the embedding and/or the loss counted as a layer in the split (Megatron-core's
  // --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split).
  bool embedding_in_split = false, loss_in_split = false;
  // Or Megatron-core's --pipeline-model-parallel-layout ("Et*3|(tt|)*29,tL"); validate_run reads
  // it into each virtual stage's transformer layers and sets vpp from it.
  std::string pipeline_layout;
  std::vector<int> layout_chunks;
  int micro_batch = 1;
  int global_batch = 0;  // 0: micro_batch * dp
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  Recompute recompute = Recompute::None;
  // --recompute-activation: the MLP's GeLU (SwiGLU) output recomputed in backward from its kept
  // input instead of kept (LayerDims::recompute_act); not with full recomputation.
  bool recompute_activation = false;
  bool scatter_gather = true;
  // Sequence parallelism (--sequence-parallel; Korthikanti et al. 2022, section 4.2.2): the
  // LayerNorm, residual and between-layer regions hold n/t of the n = b*s rows on each tensor-
  // parallel rank; all-gather / reduce-scatter replace the tensor-parallel all-reduces. Needs t > 1.
  bool sequence_parallel = false;
  // Sharded data parallelism (--zero): 0 plain (replicated optimizer, all-reduced gradients);
  // 1 Megatron's distributed optimizer (master weights and Adam state sharded over dp, gradients
  // reduce-scattered, parameters all-gathered); 2 ZeRO-2 (gradients sharded too: reduce-scattered
  // after every micro-batch; the simulator's only: require_supported refuses it for the executor);
  // 3 ZeRO-3 (parameters sharded too, gathered per layer for forward and backward). Only 3 with
  // tp = pp = 1.
  int zero = 0;
  int num_microbatches() const { return global_batch / (micro_batch * dp); }
  LayerSplit layer_split(int layers) const {
    return {layers, pp, vpp, first_stage_layers, last_stage_layers, embedding_in_split, loss_in_split, layout_chunks};
  }
};

struct RunConfig {
  ModelConfig model;
  ParallelConfig par;
  std::string experiment = "train";
  BackendKind backend = BackendKind::Cpu;
  AttentionBackend attention_backend = AttentionBackend::Auto;
  CommKind comm = CommKind::Local;
  int ranks = 0;  // 0: tp * pp * dp
  Precision precision = Precision::F32;
  int iters = 10;                // training iterations in all
  int warmup = 1;                // of which the first `warmup` are not timed
  uint64_t seed = 1234;
  OptimizerConfig opt;
  std::string data = "synthetic";  // synthetic | a dataset prefix (PREFIX.bin/.idx); megatron order: a list
  DataOrder data_order = DataOrder::Ptdp;
  std::string split = "969,30,1";  // --split (megatron order): train,valid,test shares
  std::string data_cache;          // --data-cache-path (megatron order); empty: Megatron's PREFIX/cache/...
  std::string csv;                 // result file; empty: none
  int log_interval = 1;
  // Evaluation on the valid split (Megatron's --eval-iters, --eval-interval): eval_iters global
  // batches every eval_interval iterations (0: none between) and after the last; 0 iters: none.
  int eval_iters = 0;
  int eval_interval = 0;
  LogFormat log_format = LogFormat::Ptdp;
  bool overlap_grad_reduce = false;          // data-parallel all-reduce during backward
  int64_t grad_bucket_elems = 40'000'000;  // data-parallel bucket size in elements (>= kMinGradBucketElems)
  // --grad-reduce-in-bf16 (Megatron-core's): the data-parallel sum of the f32 gradients done in bf16
  // (each rank's gradient rounded to bf16, summed in bf16, the sum widened back to f32).
  bool grad_reduce_bf16 = false;
  // --overlap-param-gather-with-optimizer-step (Megatron-core's): the distributed optimizer's
  // parameter all-gather overlapped with the optimizer step (interleaved schedule); timing only.
  bool overlap_param_gather_with_optimizer_step = false;
  double comm_timeout_s = 300;               // a rank waiting longer for another stops the run
  std::string save_dir, load_dir;            // checkpoints (--save, --load)
  int save_interval = 0;                     // 0: save at the end only
  bool skip_nonfinite = false;               // skip steps with non-finite loss/gradients
  std::string loss_log;                      // --loss-log: iteration,loss,... CSV (world rank 0)
  std::string save_init_dir;                 // --save-init: the initial weights, as iteration 0
  // --load with another learning-rate schedule than the checkpoint's: this run's (Megatron's
  // --override-opt_param-scheduler) or the checkpoint's (--use-checkpoint-opt_param-scheduler).
  bool override_scheduler = false, use_checkpoint_scheduler = false;
  bool gemm_rate = false;                    // --gemm-rate: the step against sgemm at the model's shapes
  // TensorBoard event files (Megatron's flags and scalar names; experiments/train_log.h): every
  // tensorboard_log_interval iterations; the timers, validation perplexity and world size only
  // when asked, the loss scale unless --no-log-loss-scale-to-tensorboard.
  std::string tensorboard_dir;
  int tensorboard_log_interval = 1;
  bool log_timers_to_tensorboard = false, log_loss_scale_to_tensorboard = true;
  bool log_validation_ppl_to_tensorboard = false, log_world_size_to_tensorboard = false;
  // The software a simulated run models (--stack, core/sim/stack.h): megatron-2021 (the paper's
  // code), megatron-2022, mcore, megatron-deepspeed, or ptdp (its own CUDA backend's kernels).
  // `ptdp train` runs ptdp's own code and leaves it as it is.
  StackKind stack = StackKind::Megatron2021;
  // Simulated only (--fp8-format; docs/SIMULATOR.md, "FP8"): the linear layers' GEMMs in FP8 under
  // Transformer Engine's delayed scaling. `ptdp train` has no FP8 and does not take the flag.
  Fp8Format fp8_format = Fp8Format::None;
  // Simulated only (--fp8-format with --fp8-param-gather, Megatron-core's flag): the layers'
  // weights kept in FP8 (no 16-bit copy beside the FP8 one) and all-gathered in FP8.
  bool fp8_param_gather = false;
  // f16 loss scaling, Megatron's flags: --loss-scale S > 0 fixes the scale; 0 scales
  // dynamically from --initial-loss-scale (halved after --hysteresis overflows, not below
  // --min-loss-scale; doubled after --loss-scale-window clean steps). f32 and bf16: scale 1.
  double loss_scale = 0;
  double initial_loss_scale = 4294967296.0;  // 2^32
  double min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
};

// The loss scaling of a run (constant 1 unless --precision f16).
LossScaleConfig loss_scale_config(const RunConfig& c);
// The compute dtype of --precision.
DType precision_dtype(Precision precision);

// The longest --comm-timeout, in seconds (11.6 days).
inline constexpr double kMaxCommTimeoutS = 1e6;
inline constexpr int64_t kMinGradBucketElems = 1024;  // --grad-bucket-size

// Checks every rule of the flags (throws UsageError naming the flag and the rule) and fills
// defaults: dp (from ranks), global_batch, ranks.
void validate_run(RunConfig& c);
// What this build can run: refuses, with a UsageError, what is not implemented yet.
void require_supported(const RunConfig& c);

}  // namespace ptdp
