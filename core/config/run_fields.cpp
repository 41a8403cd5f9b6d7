// RunConfig's own fields: the backend and communicator, precision, iterations, data, outputs,
// checkpoints, logging, loss scaling and the simulated software stack.
#include <cstdint>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "core/config/config_fields.h"

namespace ptdp {

namespace {
// Why these fields are not in the configuration key (every other field is).
constexpr const char* kHowLong = "how long the run measures: iter_time_ms is the median of the timed iterations";
constexpr const char* kSameShape = "which tokens: the step's work is the same for any data of the same shape";
constexpr const char* kOutput = "where and how the results are written or printed";
constexpr const char* kOutsideTheStep = "it runs between steps, outside the timed iteration";
constexpr const char* kLossScale = "f16's loss scaling changes the values (and which updates overflow), not the work of a step";

// How the run executes: what it is called, its backend and communicator, ranks, precision,
// iterations and seed, and what it does on the way.
void add_execution_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(experiment), "experiment", g)
                  .flags("--experiment")
                  .help("experiment name in the result row")
                  .column()
                  .key());
  v.push_back(Field(PTDP_MEMBER(backend), "backend", g)
                  .flags("--backend")
                  .help(enum_choices<BackendKind>(true))
                  .column()
                  .key());
  v.push_back(Field(PTDP_MEMBER(attention_backend), "attention_backend", g)
                  .flags("--attention-backend")
                  .help(enum_choices<AttentionBackend>(true) +
                        ": the attention kernels (cudnn: cuDNN's fused attention; flash: ptdp's tiled kernel; unfused: "
                        "the [s, s] probabilities materialised, as Megatron-LM of 2021; Megatron-core's fused and local "
                        "are cudnn and unfused)")
                  .column()
                  .key("auto")
                  .in_specs());
  v.push_back(Field(PTDP_MEMBER(comm), "comm", g).flags("--comm").help(enum_choices<CommKind>(true)).column().key());
  v.push_back(Field(PTDP_MEMBER(ranks), "ranks", g)
                  .flags("--ranks")
                  .help("ranks (default t*p*d)")
                  .no_default_in_help()
                  .rule({.lo = 0.0, .must = "must be positive"})
                  .not_key("in the key as the column gpus"));
  v.push_back(Field(PTDP_MEMBER(precision), "precision", g)
                  .flags("--precision")
                  .help(enum_choices<Precision>(true))
                  .alias_flag("--fp16", "f16", "Megatron's name for --precision f16")
                  .alias_flag("--bf16", "bf16", "Megatron's name for --precision bf16")
                  .column()
                  .key()
                  .in_specs());
  v.push_back(Field(PTDP_MEMBER(iters), "iters", g)
                  .flags("--iters,--train-iters")
                  .help("training iterations in all")
                  .positive()
                  .column()
                  .in_specs()
                  .not_key(kHowLong));
  v.push_back(Field(PTDP_MEMBER(warmup), "warmup", g)
                  .flags("--warmup")
                  .help("first iterations left out of the timing")
                  .non_negative()
                  .in_specs()
                  .not_key(kHowLong));
  v.push_back(Field(PTDP_MEMBER(seed), "seed", g).flags("--seed").help("seed of initialisation and data order")
                  .not_key("runs that differ only in it are repeated measurements of one configuration")
                  .checkpoint());
  v.push_back(Field(PTDP_MEMBER(comm_timeout_s), "comm_timeout", g)
                  .flags("--comm-timeout")
                  .help("seconds a rank waits for another in a collective or receive before the run stops")
                  .rule({.finite = true, .must = "must be a finite number of seconds"})
                  .rule({.lo = 0.0, .lo_open = true, .must = "must be a positive number of seconds"})
                  .at_most(kMaxCommTimeoutS, fmt::format("must be at most {} seconds", kMaxCommTimeoutS))
                  .not_key("a limit on waiting, not a setting of the work"));
  v.push_back(Field(PTDP_MEMBER(skip_nonfinite), "skip_nonfinite", g)
                  .flags("--skip-nonfinite")
                  .help("skip steps whose loss or gradients are not finite")
                  .not_key("what becomes of a step whose loss is not finite; a finite step's work is the same"));
  v.push_back(Field(PTDP_MEMBER(gemm_rate), "gemm_rate", g)
                  .flags("--gemm-rate")
                  .help("after the run, time OpenBLAS sgemm at this model's GEMM shapes (one layer's and the "
                        "logits', forward and backward) and print the step's model FLOP/s against it (cpu backend, "
                        "one rank)")
                  .not_key("a measurement after the run, beside the result row"));
}

// --data as a checkpoint records it: each dataset prefix as an absolute path without links (a
// resume from another directory names the same files), weights and "synthetic" as given.
std::optional<std::string> data_checkpoint_text(const RunConfig& c) {
  std::string out;
  std::istringstream words(c.data);
  for (std::string w; words >> w;) {
    const bool number = !w.empty() && w.find_first_not_of("0123456789.eE+-") == std::string::npos;
    std::error_code ec;
    if (!number && w != "synthetic")
      if (auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(w, ec), ec); !ec) w = p.string();
    out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

// The data and its sample order.
void add_data_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(data), "data", g)
                  .flags("--data")
                  .help("synthetic | PREFIX of a Megatron .bin/.idx dataset | with --data-order megatron, Megatron's "
                        "list 'W1 PREFIX1 W2 PREFIX2 ...' (a weighted blend) or 'PREFIX1 PREFIX2 ...' (blended by "
                        "size); Megatron's --data-path takes the list as separate words")
                  .column(RowUse::Measured)
                  .not_key(kSameShape)
                  .checkpoint(data_checkpoint_text)
                  .resume_check(ResumeCheck::Data));
  v.push_back(Field(PTDP_MEMBER(data_order), "data_order", g)
                  .flags("--data-order")
                  .help("ptdp (fixed windows over the token stream, seeded Fisher-Yates per epoch) | megatron "
                        "(Megatron-core's GPTDataset/BlendedDataset order: the same samples as Megatron-LM for the "
                        "same files, --seed and --split); not given, --split, --data-cache-path or a list in --data "
                        "select megatron")
                  .column(RowUse::Measured)
                  .not_key(kSameShape)
                  .checkpoint()
                  .resume_check(ResumeCheck::Data));
  v.push_back(Field(PTDP_MEMBER(split), "split", g)
                  .flags("--split")
                  .help("with --data-order megatron: train,valid,test shares of the documents")
                  .not_key(kSameShape)
                  .checkpoint([](const RunConfig& c) {  // the ptdp order does not split
                    return c.data_order == DataOrder::Megatron ? std::optional(c.split) : std::nullopt;
                  })
                  .resume_check(ResumeCheck::Data));
  v.push_back(Field(PTDP_MEMBER(data_cache), "data_cache_path", g)
                  .flags("--data-cache-path")
                  .help("with --data-order megatron: where the index files (.npy, named as Megatron-core names them) "
                        "are built and reused, Megatron's own among them (default: Megatron-core's, "
                        "PREFIX/cache/GPTDataset_indices)")
                  .no_default_in_help()
                  .not_key("where the index files are kept"));
}

// The data-parallel gradient reduction.
void add_data_parallel_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(overlap_grad_reduce), "overlap_grad_reduce", g)
                  .flags("--overlap-grad-reduce")
                  .help("overlap each data-parallel gradient bucket's all-reduce with the backward pass")
                  .in_specs()
                  .column()
                  .key("0"));
  v.push_back(Field(PTDP_MEMBER(grad_bucket_elems), "grad_bucket_size", g)
                  .flags("--grad-bucket-size,--ddp-bucket-size")
                  .help("data-parallel all-reduce bucket, in elements")
                  .rule({.lo = double(kMinGradBucketElems),
                         .must = fmt::format("must be at least {} elements (Megatron's default is 40000000)",
                                             kMinGradBucketElems)})
                  .column()
                  .key("40000000")
                  .checkpoint([](const RunConfig& c) {  // --zero 1's pieces are chunks of the buckets
                    return c.par.zero == 1 ? std::optional(std::to_string(c.grad_bucket_elems)) : std::nullopt;
                  }));
  v.push_back(Field(PTDP_MEMBER(grad_reduce_bf16), "grad_reduce_in_bf16", g)
                  .flags("--grad-reduce-in-bf16")
                  .help("sum the data-parallel gradients in bf16 (Megatron-core's flag; needs --precision bf16): each "
                        "rank's f32 gradient rounded to bf16, summed in bf16, the sum kept as f32")
                  .column()
                  .key("0")
                  .in_specs());
  v.push_back(Field(PTDP_MEMBER(overlap_param_gather_with_optimizer_step), "overlap_param_gather_with_optimizer_step", g)
                  .flags("--overlap-param-gather-with-optimizer-step")
                  .help("the distributed optimizer's parameter all-gather overlapped with the optimizer step "
                        "(Megatron-core's flag; needs --zero 1 and --schedule interleaved); the values are the same")
                  .column()
                  .key("0")
                  .in_specs());
}

// Checkpoints.
void add_checkpoints_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(save_dir), "save", g)
                  .flags("--save")
                  .help("write checkpoints to this directory")
                  .no_default_in_help()
                  .not_key(kOutsideTheStep));
  v.push_back(Field(PTDP_MEMBER(save_interval), "save_interval", g)
                  .flags("--save-interval")
                  .help("checkpoint every N iterations (0: at the end only)")
                  .non_negative()
                  .not_key(kOutsideTheStep));
  v.push_back(Field(PTDP_MEMBER(load_dir), "load", g)
                  .flags("--load")
                  .help("resume from the latest checkpoint in this directory")
                  .no_default_in_help()
                  .not_key("where the run resumes from: the same steps as a run that ran through"));
  v.push_back(Field(PTDP_MEMBER(override_scheduler), "override_opt_param_scheduler", g)
                  .flags("--override-opt_param-scheduler")
                  .help("with --load: train with this run's learning-rate schedule (--lr, --min-lr, "
                        "--lr-warmup-iters, --lr-decay-iters, --weight-decay) where the checkpoint's differs "
                        "(Megatron's flag; without it or the next one a difference is refused)")
                  .not_key("where the schedule comes from on a resume: the schedule's own flags are not in the key"));
  v.push_back(Field(PTDP_MEMBER(use_checkpoint_scheduler), "use_checkpoint_opt_param_scheduler", g)
                  .flags("--use-checkpoint-opt_param-scheduler")
                  .help("with --load: train with the checkpoint's learning-rate schedule, whatever this run's "
                        "flags say (Megatron's flag)")
                  .not_key("where the schedule comes from on a resume: the schedule's own flags are not in the key"));
  v.push_back(Field(PTDP_MEMBER(save_init_dir), "save_init", g)
                  .flags("--save-init")
                  .help("before training, write the initial weights to DIR as the checkpoint of iteration 0")
                  .no_default_in_help()
                  .not_key(kOutsideTheStep));
}

// f16's loss scaling (Megatron's flags).
void add_loss_scaling_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(loss_scale), "loss_scale", g)
                  .flags("--loss-scale")
                  .help("f16: a constant loss scale (0: dynamic)")
                  .rule({.lo = 0.0, .hi = 1e38, .hi_open = true,
                         .must = "must be 0 (dynamic) or a positive finite scale"})
                  .not_key(kLossScale));
  v.push_back(Field(PTDP_MEMBER(initial_loss_scale), "initial_loss_scale", g)
                  .flags("--initial-loss-scale")
                  .help("f16: the dynamic loss scale to start from")
                  .rule({.lo = 0.0, .hi = 1e38, .lo_open = true, .hi_open = true, .must = "must be positive and finite"})
                  .not_key(kLossScale));
  v.push_back(Field(PTDP_MEMBER(min_loss_scale), "min_loss_scale", g)
                  .flags("--min-loss-scale")
                  .help("f16: the dynamic loss scale's floor")
                  .not_key(kLossScale));
    // The checkpoint stores the scaler's counters in 32 bits: larger values would resume differently.
  v.push_back(Field(PTDP_MEMBER(loss_scale_window), "loss_scale_window", g)
                  .flags("--loss-scale-window")
                  .help("f16: clean steps before the scale doubles")
                  .at_least(1)
                  .at_most(INT32_MAX)
                  .not_key(kLossScale));
  v.push_back(Field(PTDP_MEMBER(hysteresis), "hysteresis", g)
                  .flags("--hysteresis")
                  .help("f16: overflows tolerated before the scale halves")
                  .at_least(1)
                  .at_most(INT32_MAX)
                  .not_key(kLossScale));
}

// What the run writes and prints, and its evaluations.
void add_outputs_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(csv), "csv", g)
                  .flags("--csv")
                  .help("append the result row to this CSV file")
                  .no_default_in_help()
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_format), "log_format", g)
                  .flags("--log-format")
                  .help("the progress line: ptdp, or megatron (Megatron-LM's training_log line: its keys, units and "
                        "averages over the interval, so that its log parsers read it)")
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_interval), "log_interval", g)
                  .flags("--log-interval")
                  .help("print a progress line every N iterations")
                  .positive()
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(eval_iters), "eval_iters", g)
                  .flags("--eval-iters")
                  .help("evaluate the loss and perplexity over N global batches of the valid split (--data-order "
                        "megatron; synthetic data: another synthetic stream) after the last iteration, and with the "
                        "Megatron order N batches of the test split once after training (0: no evaluation)")
                  .non_negative(" (0: no evaluation)")
                  .not_key(kOutsideTheStep));
  v.push_back(Field(PTDP_MEMBER(eval_interval), "eval_interval", g)
                  .flags("--eval-interval")
                  .help("with --eval-iters: also evaluate every N iterations, each time on the next N x B valid "
                        "samples, as Megatron-LM (0: after the last iteration only)")
                  .non_negative(" (0: evaluate after the last iteration only)")
                  .not_key(kOutsideTheStep));
  v.push_back(Field(PTDP_MEMBER(tensorboard_dir), "tensorboard_dir", g)
                  .flags("--tensorboard-dir")
                  .help("write TensorBoard event files here, with Megatron-LM's scalar names (lm loss, "
                        "learning-rate, loss-scale, batch-size, grad-norm, each also 'vs samples'; lm loss "
                        "validation)")
                  .no_default_in_help()
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(tensorboard_log_interval), "tensorboard_log_interval", g)
                  .flags("--tensorboard-log-interval")
                  .help("write the iteration's scalars to TensorBoard every N iterations")
                  .positive()
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_timers_to_tensorboard), "log_timers_to_tensorboard", g)
                  .flags("--log-timers-to-tensorboard")
                  .help("TensorBoard: also iteration-time (s) and throughput (TFLOP/s per GPU) at each progress line")
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_loss_scale_to_tensorboard), "log_loss_scale_to_tensorboard", g)
                  .flags("--log-loss-scale-to-tensorboard")
                  .negation("--no-log-loss-scale-to-tensorboard")
                  .help("TensorBoard: the loss scale (default on, as Megatron's)")
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_validation_ppl_to_tensorboard), "log_validation_ppl_to_tensorboard", g)
                  .flags("--log-validation-ppl-to-tensorboard")
                  .help("TensorBoard: also the validation perplexity")
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(log_world_size_to_tensorboard), "log_world_size_to_tensorboard", g)
                  .flags("--log-world-size-to-tensorboard")
                  .help("TensorBoard: also the world size")
                  .not_key(kOutput));
  v.push_back(Field(PTDP_MEMBER(loss_log), "loss_log", g)
                  .flags("--loss-log")
                  .help("write iteration,loss,grad_norm,lr of every iteration to this CSV at the end (atomically)")
                  .no_default_in_help()
                  .not_key(kOutput));
}

// The software a simulated run models.
void add_simulated_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Run;
  v.push_back(Field(PTDP_MEMBER(stack), "stack", g)
                  .flags("--stack")
                  .bound_by_hand()  // by `ptdp simulate` (and `plan`) alone: `train` runs ptdp's own code
                  .help("software modelled: megatron-2021 (the paper's code), megatron-2022 (asynchronous "
                        "tensor-parallel communication in backward, fused gradient accumulation), mcore "
                        "(Megatron-Core 2024: also flash attention, TP/DP communication overlap, fp32 gradients), "
                        "megatron-deepspeed (DeepSpeed's pipeline engine: blocking p2p, its ZeRO-1 and bf16 "
                        "optimizer), ptdp (ptdp's own CUDA backend: its kernels, unfused attention or with "
                        "--attention-backend cudnn cuDNN's fused attention); docs/SIMULATOR.md")
                  .column(RowUse::Simulated)
                  .key("")
                  .in_specs());
  v.push_back(Field(PTDP_MEMBER(fp8_format), "fp8_format", g)
                  .flags("--fp8-format")
                  .bound_by_hand()  // by `ptdp simulate` alone: ptdp's executor has no FP8
                  .help("simulated FP8 of the linear layers' GEMMs (Transformer Engine's delayed scaling): none, "
                        "e4m3, or hybrid (e5m2 gradients); needs --stack mcore and a Hopper profile "
                        "(compute.peak_tflops_fp8); docs/SIMULATOR.md, \"FP8\"")
                  .column(RowUse::Simulated)
                  .key("none")  // rows written before FP8 was simulated: none
                  .in_specs());
  v.push_back(Field(PTDP_MEMBER(fp8_param_gather), "fp8_param_gather", g)
                  .flags("--fp8-param-gather")
                  .bound_by_hand()  // by `ptdp simulate` alone, as --fp8-format
                  .help("simulated with --fp8-format: the layers' weights kept in FP8 only (no 16-bit copy) and "
                        "the distributed optimizer's parameter all-gather in FP8, as NeMo's FP8 recipes set it "
                        "(Megatron-core's --fp8-param-gather); docs/SIMULATOR.md, \"FP8\"")
                  .column(RowUse::Simulated)
                  .key("0")
                  .in_specs());
}

}  // namespace

const std::vector<Field>& run_fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> v;
    add_execution_fields(v);
    add_data_fields(v);
    add_data_parallel_fields(v);
    add_checkpoints_fields(v);
    add_loss_scaling_fields(v);
    add_outputs_fields(v);
    add_simulated_fields(v);
    return v;
  }();
  return fields;
}

}  // namespace ptdp
