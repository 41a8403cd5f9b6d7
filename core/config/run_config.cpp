#include "core/config/run_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "core/backend/attention_choice.h"
#include "core/common/error.h"
#include "core/config/config_fields.h"

namespace ptdp {

namespace {

// The model's rules between fields (each field's own: the tables).
void validate_model_shape(const ModelConfig& c) {
  if (c.hidden % c.heads != 0) usage_error("--heads {} must divide --hidden {}", c.heads, c.hidden);
  if (c.query_groups > c.heads)
    usage_error("--num-query-groups {} must be at most --heads {}", c.query_groups, c.heads);
  if (c.heads % c.groups() != 0) usage_error("--num-query-groups {} must divide --heads {}", c.query_groups, c.heads);
  if (c.arch == Arch::Llama && c.head_dim() % 2 != 0)
    usage_error("--arch llama needs an even head size for the rotary embedding (--hidden {} / --heads {} = {})",
                c.hidden, c.heads, c.head_dim());
}

// "--tp T x --pp P", with " x --context-parallel-size C" where C > 1.
std::string model_parallel_flags(const ParallelConfig& p) {
  std::string out = fmt::format("--tp {} x --pp {}", p.tp, p.pp);
  if (p.cp > 1) out += fmt::format(" x --context-parallel-size {}", p.cp);
  return out;
}

// What tensor parallelism splits must divide by t; the stages' layers; d and the ranks.
void validate_layout(RunConfig& c) {
  ParallelConfig& p = c.par;
  // Bounds that keep every product below in range (no layout needs more).
  if (int64_t(p.tp) * p.pp * p.cp * std::max(p.dp, 1) > (1 << 20))
    usage_error("{} x --dp {} must be at most {} ranks", model_parallel_flags(p), std::max(p.dp, 1), 1 << 20);
  if (c.model.heads % p.tp != 0) usage_error("--tp {} must divide --heads {}", p.tp, c.model.heads);
  // Each tensor-parallel rank holds whole query groups (Megatron-core's divide(num_query_groups,
  // t); its newer all-gather path for t > groups is not implemented).
  if (c.model.gqa() && c.model.groups() % p.tp != 0)
    usage_error("--tp {} must divide --num-query-groups {}", p.tp, c.model.groups());
  if (c.model.ffn_hidden() % p.tp != 0)
    usage_error("--tp {} must divide the MLP's hidden size {} (--arch {})", p.tp, c.model.ffn_hidden(),
                c.model.arch);
  if (!p.pipeline_layout.empty()) {  // the layout names the virtual stages, so it also gives v
    p.layout_chunks = parse_pipeline_layout(p.pipeline_layout, p.pp, c.model.layers);
    const int v = int(p.layout_chunks.size()) / p.pp;
    if (p.vpp != 1 && p.vpp != v)
      usage_error("--vpp {} disagrees with --pipeline-model-parallel-layout '{}', which has {} virtual stages per "
                  "pipeline stage",
                  p.vpp, p.pipeline_layout, v);
    p.vpp = v;
    if (v > 1 && p.schedule != ScheduleKind::Interleaved)
      usage_error("--pipeline-model-parallel-layout '{}' has {} virtual stages per pipeline stage: it needs --schedule "
                  "interleaved",
                  p.pipeline_layout, v);
  }
  if (const std::string e = layer_split_error(p.layer_split(c.model.layers)); !e.empty()) usage_error("{}", e);
  // Context parallelism (Megatron-core's rank order: tensor, context, data, pipeline): the world
  // is t x c x p x d (the chunks' rules: validate_context_parallel).
  const int tpc = p.tp * p.pp * p.cp;
  if (p.dp == 0) {
    if (c.ranks == 0) {
      p.dp = 1;
    } else {
      if (c.ranks % tpc != 0) usage_error("--ranks {} must be a multiple of {}", c.ranks, model_parallel_flags(p));
      p.dp = c.ranks / tpc;
    }
  }
  const int world = tpc * p.dp;
  if (c.ranks == 0) c.ranks = world;
  if (c.ranks != world)
    usage_error("--ranks {} (under mpirun: the number of processes) must equal {} x --dp {} = {}", c.ranks,
                model_parallel_flags(p), p.dp, world);
  if (c.gemm_rate && (c.backend != BackendKind::Cpu || world != 1))
    usage_error("--gemm-rate compares one CPU rank's step with sgemm: it needs --backend cpu and one rank (this run "
                "has --backend {} and {} ranks)",
                c.backend, world);
}

// Context parallelism: the sequence cut into 2c chunks, attention as block attention over the group.
void validate_context_parallel(const RunConfig& c, const ParallelConfig& p) {
  if (p.cp == 1) return;
  const int64_t s = c.model.seq_length;
  if (s % (2 * p.cp) != 0)
    usage_error("--context-parallel-size {} needs --seq-length {} to be a multiple of 2 x {} (each sequence is cut "
                "into 2c equal chunks)",
                p.cp, s, p.cp);
  if (p.sequence_parallel && (int64_t(p.micro_batch) * s / p.cp) % p.tp != 0)
    usage_error("--sequence-parallel with --context-parallel-size {} needs --tp {} to divide --micro-batch {} x "
                "--seq-length {} / {} = {} (the rows of a context-parallel rank)",
                p.cp, p.tp, p.micro_batch, s, p.cp, int64_t(p.micro_batch) * s / p.cp);
  if (c.attention_backend == AttentionBackend::Unfused)
    usage_error("--context-parallel-size {} needs block attention: --attention-backend unfused materialises the "
                "[s, s] probabilities, which a context-parallel group never holds (use auto or flash)",
                p.cp);
  if (p.cp_comm == CpComm::A2A) {
    const int heads = c.model.heads / p.tp, groups = c.model.groups() / p.tp;
    if (heads % p.cp != 0)
      usage_error("--cp-comm-type a2a needs --context-parallel-size {} to divide the heads of each tensor-parallel "
                  "rank ({}: it exchanges heads for sequence)",
                  p.cp, heads);
    if (groups % p.cp != 0 && p.cp % groups != 0)
      usage_error("--cp-comm-type a2a needs --context-parallel-size {} and the key/value heads of each "
                  "tensor-parallel rank ({}) to divide one another (fewer are replicated to the ranks that read them)",
                  p.cp, groups);
  }
}

// The batch, the schedule and the sharding.
void validate_schedule(const RunConfig& c, ParallelConfig& p) {
  if (p.global_batch == 0) p.global_batch = p.micro_batch * p.dp;
  if (p.global_batch % (p.micro_batch * p.dp) != 0)
    usage_error("--global-batch {} must be a multiple of --micro-batch {} x --dp {} = {}", p.global_batch,
                p.micro_batch, p.dp, p.micro_batch * p.dp);
  if (p.zero == 3 && (p.tp != 1 || p.pp != 1))
    usage_error("--zero 3 needs --tp 1 and --pp 1 (ZeRO-3 shards whole layers over the data-parallel group, as in "
                "the paper's comparison), not --tp {} --pp {}",
                p.tp, p.pp);
  if (p.sequence_parallel && p.tp == 1)
    usage_error("--sequence-parallel needs --tp > 1 (it splits the rows of the tensor-parallel group; --tp 1 has "
                "none to split)");
  if (p.sequence_parallel && (int64_t(p.micro_batch) * c.model.seq_length) % p.tp != 0)
    usage_error("--sequence-parallel needs --tp {} to divide --micro-batch {} x --seq-length {} = {} (each "
                "tensor-parallel rank holds an equal share of the rows)",
                p.tp, p.micro_batch, c.model.seq_length, int64_t(p.micro_batch) * c.model.seq_length);
  if (p.recompute_activation && p.recompute == Recompute::Full)
    usage_error("--recompute-activation needs --recompute none or selective: --recompute full already recomputes "
                "the whole layer, its activation with it");
  validate_context_parallel(c, p);
  if (p.vpp > 1 && p.schedule != ScheduleKind::Interleaved) usage_error("--vpp {} needs --schedule interleaved", p.vpp);
  if (p.schedule == ScheduleKind::Interleaved) {
    if (p.vpp < 2) usage_error("--schedule interleaved needs --vpp of at least 2");
    if (p.pp < 2) usage_error("--vpp {} needs a pipeline: --pp 1 has nothing to interleave", p.vpp);
    if (p.num_microbatches() % p.pp != 0)
      usage_error("--schedule interleaved needs the number of micro-batches ({}) to be a multiple of --pp {}",
                  p.num_microbatches(), p.pp);
  }
}

// Precision and loss scaling, the communicator, iterations and evaluation.
void validate_run_settings(const RunConfig& c) {
  if (c.loss_scale > 0 && c.precision != Precision::F16)
    usage_error("--loss-scale {} applies to --precision f16 only (not {})", c.loss_scale, c.precision);
  if (!(c.min_loss_scale > 0 && c.min_loss_scale <= c.initial_loss_scale))
    usage_error("--min-loss-scale {} must be positive and at most --initial-loss-scale {}", c.min_loss_scale,
                c.initial_loss_scale);
  if (c.comm == CommKind::Nccl && c.backend != BackendKind::Cuda) usage_error("--comm nccl needs --backend cuda");
  if (c.warmup >= c.iters)
    usage_error("--warmup {} must be less than --iters {} (at least one iteration is timed)", c.warmup, c.iters);
  if (c.eval_interval > 0 && c.eval_iters == 0)
    usage_error("--eval-interval {} needs --eval-iters N > 0 (the global batches each evaluation runs)",
                c.eval_interval);
  if (c.eval_iters > 0 && c.data_order == DataOrder::Ptdp && c.data != "synthetic")
    usage_error("--eval-iters {} needs a valid split: --data-order megatron (the valid share of --split), or "
                "--data synthetic (ptdp's own order of a dataset has no held-out part)",
                c.eval_iters);
  const OptimizerConfig& o = c.opt;
  if (!(o.lr.min_lr >= 0) || o.lr.min_lr > o.lr.max_lr)
    usage_error("--min-lr {} must be in [0, --lr {}]", o.lr.min_lr, o.lr.max_lr);
  if (o.lr.warmup_fraction > 0 && o.lr.warmup_iters > 0)
    usage_error("--lr-warmup-fraction {} and --lr-warmup-iters {}: give one of them (as Megatron-LM)",
                o.lr.warmup_fraction, o.lr.warmup_iters);
  if (o.lr.decay_iters > 0 && o.lr.decay_iters <= o.lr.warmup_iters)
    usage_error("--lr-decay-iters {} must be more than --lr-warmup-iters {} (the decay runs from the end of the "
                "warm-up to it; 0 keeps the rate constant after the warm-up)",
                o.lr.decay_iters, o.lr.warmup_iters);
  if (o.lr.warmup_fraction > 0 && o.lr.decay_iters == 0)
    usage_error("--lr-warmup-fraction {} is a fraction of --lr-decay-iters, which is 0", o.lr.warmup_fraction);
  if (o.lr.style == LrDecayStyle::Wsd && !(o.lr.wsd_decay_iters > 0 && o.lr.wsd_decay_iters <= o.lr.decay_iters))
    usage_error("--lr-decay-style WSD needs --lr-wsd-decay-iters N with 0 < N <= --lr-decay-iters {} (the "
                "iterations of the final anneal; N is {})",
                o.lr.decay_iters, o.lr.wsd_decay_iters);
  if (c.data.empty()) usage_error("--data must be 'synthetic' or a dataset prefix");
  if (c.data_order == DataOrder::Ptdp && c.data.find_first_of(" \t") != std::string::npos)
    usage_error("--data '{}': a list of datasets (Megatron's weighted blend) needs --data-order megatron", c.data);
  if (c.data_order == DataOrder::Megatron && c.data == "synthetic")
    usage_error("--data-order megatron orders a dataset's documents: give --data PREFIX (or a weighted list)");
  if (c.save_interval > 0 && c.save_dir.empty()) usage_error("--save-interval {} needs --save DIR", c.save_interval);
}

// Megatron-core's bf16 gradient reduction, precision-aware optimizer and parameter gather with the
// optimizer step: the rules of its arguments and OptimizerConfig, in ptdp's terms.
void validate_precision_options(const RunConfig& c) {
  if (c.grad_reduce_bf16 && c.precision != Precision::Bf16)
    usage_error("--grad-reduce-in-bf16 needs --precision bf16 (Megatron-core reduces the gradients in the weights' "
                "dtype when it is bf16; this run's weights are {})",
                c.precision);
  const OptimizerConfig& o = c.opt;
  const std::pair<const char*, DType> dtypes[] = {{"--main-params-dtype", o.main_params_dtype},
                                                  {"--main-grads-dtype", o.main_grads_dtype},
                                                  {"--exp-avg-dtype", o.exp_avg_dtype},
                                                  {"--exp-avg-sq-dtype", o.exp_avg_sq_dtype}};
  for (const auto& [flag, dt] : dtypes)
    if (dt != DType::F32 && !o.precision_aware)
      usage_error("{} {} needs --use-precision-aware-optimizer (without it the optimizer's state is f32)", flag,
                  dtype_name(dt));
  if (o.precision_aware && c.par.zero == 0)
    usage_error("--use-precision-aware-optimizer needs a sharded optimizer: --zero 1 (the distributed optimizer, as "
                "Megatron-core), 2 or 3");
  if (o.main_params_dtype == DType::BF16)
    usage_error("--main-params-dtype bf16: the master weights may be f32 or f16 (Megatron-core's choices)");
  if (o.main_params_dtype != DType::F32 && c.precision == Precision::F32)
    usage_error("--main-params-dtype {} needs 16-bit weights (--precision bf16 or f16): with f32 weights the weights "
                "are the master weights",
                dtype_name(o.main_params_dtype));
  if (o.main_grads_dtype == DType::F16)
    usage_error("--main-grads-dtype f16: the gradients the optimizer reads may be f32 or bf16 (Megatron-core's "
                "choices)");
  if (o.main_grads_dtype == DType::BF16 && !c.grad_reduce_bf16)
    usage_error("--main-grads-dtype bf16 needs --grad-reduce-in-bf16 (the optimizer reads the gradients in bf16 only "
                "where they were reduced in bf16; Megatron-core refuses it with gradients reduced in f32)");
  if (c.overlap_param_gather_with_optimizer_step && c.par.zero != 1 && c.par.zero != 2)
    usage_error("--overlap-param-gather-with-optimizer-step needs the distributed optimizer (--zero 1, or 2)");
  if (c.overlap_param_gather_with_optimizer_step && c.par.vpp < 2)
    usage_error("--overlap-param-gather-with-optimizer-step needs interleaved pipeline parallelism (--schedule "
                "interleaved, --vpp 2 or more), as Megatron-core");
}

// An explicit cudnn: cuDNN on the GPU, for heads it takes (ptdp's flash kernel would run the rest).
void validate_attention(const RunConfig& c) {
  if (c.attention_backend != AttentionBackend::Cudnn) return;
  if (c.backend != BackendKind::Cuda)
    usage_error("--attention-backend cudnn (Megatron-core's fused) needs --backend cuda (cuDNN runs on the GPU)");
  const DType dt = precision_dtype(c.precision);
  if (!cudnn_takes_heads(dt, c.model.head_dim()))
    usage_error("--attention-backend cudnn: cuDNN's fused attention takes bf16 or f16 heads of a multiple of 8 up to "
                "256 (here {}, {}); use auto (it picks what runs), flash or unfused",
                dtype_name(dt), c.model.head_dim());
}

}  // namespace

void validate_run(RunConfig& c) {
  check_field_rules(c);
  validate_model_shape(c.model);
  validate_layout(c);
  validate_schedule(c, c.par);
  validate_run_settings(c);
  validate_attention(c);
  validate_precision_options(c);
}

void require_supported(const RunConfig& c) {
#ifndef PTDP_HAVE_CUDA
  if (c.backend == BackendKind::Cuda)
    usage_error("--backend cuda: this build has no CUDA backend (configure with -DPTDP_CUDA=ON where nvcc is installed)");
#endif
#ifndef PTDP_HAVE_NCCL
  if (c.comm == CommKind::Nccl) usage_error("--comm nccl: this build has no NCCL communicator");
#endif
  // Transformer Engine keeps f16 optimizer state with a per-tensor scale; ptdp's optimizer stores
  // 16-bit state in bf16 only.
  const std::pair<const char*, DType> states[] = {{"--main-params-dtype", c.opt.main_params_dtype},
                                                  {"--exp-avg-dtype", c.opt.exp_avg_dtype},
                                                  {"--exp-avg-sq-dtype", c.opt.exp_avg_sq_dtype}};
  for (const auto& [flag, dt] : states)
    if (dt == DType::F16)
      usage_error("{} f16: ptdp's optimizer keeps 16-bit state in bf16 only (f16 state needs Transformer Engine's "
                  "per-tensor scaling, not implemented)",
                  flag);
  if (c.par.zero == 2)
    usage_error("--zero 2: ptdp's executor runs --zero 0, 1 or 3; ZeRO-2 (gradients reduce-scattered after every "
                "micro-batch into a shard) is modelled by ptdp simulate and ptdp plan under --stack mcore only");
  if (c.grad_reduce_bf16 && c.par.zero == 3)
    usage_error("--grad-reduce-in-bf16 with --zero 3: ptdp's ZeRO-3 reduces each layer's gradients in f32 (not "
                "implemented)");

}

LossScaleConfig loss_scale_config(const RunConfig& c) {
  LossScaleConfig l;
  if (c.precision != Precision::F16) return l;
  l.dynamic = c.loss_scale == 0;
  l.initial = l.dynamic ? c.initial_loss_scale : c.loss_scale;
  l.min_scale = std::min(c.min_loss_scale, l.initial);
  l.window = c.loss_scale_window;
  l.hysteresis = c.hysteresis;
  return l;
}

DType precision_dtype(Precision precision) {
  switch (precision) {
    case Precision::Bf16: return DType::BF16;
    case Precision::F16: return DType::F16;
    case Precision::F32: break;
  }
  return DType::F32;
}

}  // namespace ptdp
