#include "core/config/run_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/common/error.h"

namespace ptdp {

namespace {
void positive(int v, const char* flag) {
  if (v <= 0) usage_error("{} {} must be positive", flag, v);
}
}  // namespace

void validate_run(RunConfig& c) {
  validate_model(c.model);
  ParallelConfig& p = c.par;
  positive(p.tp, "--tp");
  positive(p.pp, "--pp");
  positive(p.vpp, "--vpp");
  positive(p.micro_batch, "--micro-batch");
  // Bounds that keep every product below in range (no layout needs more).
  for (auto [v, flag] : {std::pair{p.tp, "--tp"}, {p.pp, "--pp"}, {p.dp, "--dp"}, {p.vpp, "--vpp"}})
    if (v > 4096) usage_error("{} {} must be at most 4096", flag, v);
  if (p.micro_batch > (1 << 20)) usage_error("--micro-batch {} must be at most {}", p.micro_batch, 1 << 20);
  if (int64_t(p.tp) * p.pp * std::max(p.dp, 1) > (1 << 20))
    usage_error("--tp {} x --pp {} x --dp {} must be at most {} ranks", p.tp, p.pp, std::max(p.dp, 1), 1 << 20);
  if (p.dp < 0) usage_error("--dp {} must be positive", p.dp);
  if (c.ranks < 0) usage_error("--ranks {} must be positive", c.ranks);
  if (p.global_batch < 0) usage_error("--global-batch {} must be positive", p.global_batch);
  if (c.model.heads % p.tp != 0) usage_error("--tp {} must divide --heads {}", p.tp, c.model.heads);
  // Each tensor-parallel rank holds whole query groups (Megatron-core's divide(num_query_groups,
  // t); its newer all-gather path for t > groups is not implemented).
  if (c.model.gqa() && c.model.groups() % p.tp != 0)
    usage_error("--tp {} must divide --num-query-groups {}", p.tp, c.model.groups());
  if (c.model.ffn_hidden() % p.tp != 0)
    usage_error("--tp {} must divide the MLP's hidden size {} (--arch {})", p.tp, c.model.ffn_hidden(),
                arch_name(c.model.arch));
  if (!p.pipeline_layout.empty()) {  // the layout names the virtual stages, so it also gives v
    p.layout_chunks = parse_pipeline_layout(p.pipeline_layout, p.pp, c.model.layers);
    const int v = int(p.layout_chunks.size()) / p.pp;
    if (p.vpp != 1 && p.vpp != v)
      usage_error("--vpp {} disagrees with --pipeline-model-parallel-layout '{}', which has {} virtual stages per "
                  "pipeline stage",
                  p.vpp, p.pipeline_layout, v);
    p.vpp = v;
    if (v > 1 && p.schedule != "interleaved")
      usage_error("--pipeline-model-parallel-layout '{}' has {} virtual stages per pipeline stage: it needs --schedule "
                  "interleaved",
                  p.pipeline_layout, v);
  }
  if (const std::string e = layer_split_error(p.layer_split(c.model.layers)); !e.empty()) usage_error("{}", e);
  if (p.dp == 0) {
    if (c.ranks == 0) {
      p.dp = 1;
    } else {
      if (c.ranks % (p.tp * p.pp) != 0)
        usage_error("--ranks {} must be a multiple of --tp {} x --pp {}", c.ranks, p.tp, p.pp);
      p.dp = c.ranks / (p.tp * p.pp);
    }
  }
  const int world = p.tp * p.pp * p.dp;
  if (c.ranks == 0) c.ranks = world;
  if (c.ranks != world)
    usage_error("--ranks {} (under mpirun: the number of processes) must equal --tp {} x --pp {} x --dp {} = {}",
                c.ranks, p.tp, p.pp, p.dp, world);
  if (c.gemm_rate && (c.backend != "cpu" || world != 1))
    usage_error("--gemm-rate compares one CPU rank's step with sgemm: it needs --backend cpu and one rank (this run "
                "has --backend {} and {} ranks)",
                c.backend, world);
  if (p.global_batch == 0) p.global_batch = p.micro_batch * p.dp;
  if (p.global_batch % (p.micro_batch * p.dp) != 0)
    usage_error("--global-batch {} must be a multiple of --micro-batch {} x --dp {} = {}", p.global_batch,
                p.micro_batch, p.dp, p.micro_batch * p.dp);
  if (p.zero != 0 && p.zero != 1 && p.zero != 3) usage_error("--zero {} must be 0, 1 or 3", p.zero);
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
  if (p.schedule != "gpipe" && p.schedule != "1f1b" && p.schedule != "interleaved")
    usage_error("--schedule '{}' must be gpipe, 1f1b or interleaved", p.schedule);
  if (p.vpp > 1 && p.schedule != "interleaved")
    usage_error("--vpp {} needs --schedule interleaved", p.vpp);
  if (p.schedule == "interleaved") {
    if (p.vpp < 2) usage_error("--schedule interleaved needs --vpp of at least 2");
    if (p.pp < 2) usage_error("--vpp {} needs a pipeline: --pp 1 has nothing to interleave", p.vpp);
    if (p.num_microbatches() % p.pp != 0)
      usage_error("--schedule interleaved needs the number of micro-batches ({}) to be a multiple of --pp {}",
                  p.num_microbatches(), p.pp);
  }
  if (c.backend != "cpu" && c.backend != "cuda") usage_error("--backend '{}' must be cpu or cuda", c.backend);
  if (c.comm != "local" && c.comm != "mpi" && c.comm != "nccl")
    usage_error("--comm '{}' must be local, mpi or nccl", c.comm);
  if (c.precision != "f32" && c.precision != "bf16" && c.precision != "f16")
    usage_error("--precision '{}' must be f32, bf16 or f16", c.precision);
  if (!(c.loss_scale >= 0 && c.loss_scale < 1e38))
    usage_error("--loss-scale {} must be 0 (dynamic) or a positive finite scale", c.loss_scale);
  if (c.loss_scale > 0 && c.precision != "f16")
    usage_error("--loss-scale {} applies to --precision f16 only (not {})", c.loss_scale, c.precision);
  if (!(c.initial_loss_scale > 0 && c.initial_loss_scale < 1e38))
    usage_error("--initial-loss-scale {} must be positive and finite", c.initial_loss_scale);
  if (!(c.min_loss_scale > 0 && c.min_loss_scale <= c.initial_loss_scale))
    usage_error("--min-loss-scale {} must be positive and at most --initial-loss-scale {}", c.min_loss_scale,
                c.initial_loss_scale);
  if (c.loss_scale_window < 1) usage_error("--loss-scale-window {} must be at least 1", c.loss_scale_window);
  // The checkpoint stores the scaler's counters in 32 bits: larger values would resume differently.
  if (c.hysteresis < 1) usage_error("--hysteresis {} must be at least 1", c.hysteresis);
  if (c.hysteresis > INT32_MAX) usage_error("--hysteresis {} must be at most 2147483647", c.hysteresis);
  if (c.loss_scale_window > INT32_MAX)
    usage_error("--loss-scale-window {} must be at most 2147483647", c.loss_scale_window);
  if (c.comm == "nccl" && c.backend != "cuda") usage_error("--comm nccl needs --backend cuda");
  positive(c.iters, "--iters");
  if (c.warmup < 0) usage_error("--warmup {} must not be negative", c.warmup);
  if (c.warmup >= c.iters)
    usage_error("--warmup {} must be less than --iters {} (at least one iteration is timed)", c.warmup, c.iters);
  positive(c.log_interval, "--log-interval");
  if (c.eval_iters < 0) usage_error("--eval-iters {} must not be negative (0: no evaluation)", c.eval_iters);
  if (c.eval_interval < 0)
    usage_error("--eval-interval {} must not be negative (0: evaluate after the last iteration only)", c.eval_interval);
  if (c.eval_interval > 0 && c.eval_iters == 0)
    usage_error("--eval-interval {} needs --eval-iters N > 0 (the global batches each evaluation runs)",
                c.eval_interval);
  if (c.eval_iters > 0 && c.data_order == "ptdp" && c.data != "synthetic")
    usage_error("--eval-iters {} needs a valid split: --data-order megatron (the valid share of --split), or "
                "--data synthetic (ptdp's own order of a dataset has no held-out part)",
                c.eval_iters);
  if (c.log_format != "ptdp" && c.log_format != "megatron")
    usage_error("--log-format '{}' must be ptdp or megatron", c.log_format);
  const OptimizerConfig& o = c.opt;
  for (auto [v, flag] : {std::pair{o.lr.max_lr, "--lr"}, {o.lr.min_lr, "--min-lr"}, {o.weight_decay, "--weight-decay"},
                         {o.clip_grad, "--clip-grad"}, {o.beta1, "--adam-beta1"}, {o.beta2, "--adam-beta2"},
                         {o.eps, "--adam-eps"}})
    if (!std::isfinite(v)) usage_error("{} {} must be a finite number", flag, v);
  if (!(o.lr.max_lr > 0)) usage_error("--lr {} must be positive", o.lr.max_lr);
  if (!(o.lr.min_lr >= 0) || o.lr.min_lr > o.lr.max_lr)
    usage_error("--min-lr {} must be in [0, --lr {}]", o.lr.min_lr, o.lr.max_lr);
  if (o.lr.warmup_iters < 0) usage_error("--lr-warmup-iters {} must not be negative", o.lr.warmup_iters);
  if (o.lr.decay_iters < 0) usage_error("--lr-decay-iters {} must not be negative", o.lr.decay_iters);
  if (o.lr.decay_iters > 0 && o.lr.decay_iters <= o.lr.warmup_iters)
    usage_error("--lr-decay-iters {} must be more than --lr-warmup-iters {} (the decay runs from the end of the "
                "warm-up to it; 0 keeps the rate constant after the warm-up)",
                o.lr.decay_iters, o.lr.warmup_iters);
  if (!(o.weight_decay >= 0)) usage_error("--weight-decay {} must not be negative", o.weight_decay);
  if (!(o.clip_grad >= 0)) usage_error("--clip-grad {} must not be negative (0 disables clipping)", o.clip_grad);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) usage_error("--adam-beta1 {} must be in [0, 1)", o.beta1);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) usage_error("--adam-beta2 {} must be in [0, 1)", o.beta2);
  if (!(o.eps > 0)) usage_error("--adam-eps {} must be positive", o.eps);
  if (c.data.empty()) usage_error("--data must be 'synthetic' or a dataset prefix");
  if (c.data_order != "ptdp" && c.data_order != "megatron")
    usage_error("--data-order '{}' must be ptdp or megatron", c.data_order);
  if (c.data_order == "ptdp" && c.data.find_first_of(" \t") != std::string::npos)
    usage_error("--data '{}': a list of datasets (Megatron's weighted blend) needs --data-order megatron", c.data);
  if (c.data_order == "megatron" && c.data == "synthetic")
    usage_error("--data-order megatron orders a dataset's documents: give --data PREFIX (or a weighted list)");
  // Bounded so that the timeout in milliseconds and a steady-clock deadline cannot overflow.
  if (!std::isfinite(c.comm_timeout_s))
    usage_error("--comm-timeout {} must be a finite number of seconds", c.comm_timeout_s);
  if (!(c.comm_timeout_s > 0))
    usage_error("--comm-timeout {} must be a positive number of seconds", c.comm_timeout_s);
  if (c.comm_timeout_s > kMaxCommTimeoutS)
    usage_error("--comm-timeout {} must be at most {} seconds", c.comm_timeout_s, kMaxCommTimeoutS);
  if (c.save_interval < 0) usage_error("--save-interval {} must not be negative", c.save_interval);
  if (c.save_interval > 0 && c.save_dir.empty()) usage_error("--save-interval {} needs --save DIR", c.save_interval);
  // A bucket is one collective per data-parallel group; below a few KiB the launches are all there
  // is (--grad-bucket-size 1 made two iterations of the tiny model take a minute).
  if (c.grad_bucket_elems < kMinGradBucketElems)
    usage_error("--grad-bucket-size {} must be at least {} elements (Megatron's default is 40000000)",
                c.grad_bucket_elems, kMinGradBucketElems);
}

void require_supported(const RunConfig& c) {
#ifndef PTDP_HAVE_CUDA
  if (c.backend == "cuda")
    usage_error("--backend cuda: this build has no CUDA backend (configure with -DPTDP_CUDA=ON where nvcc is installed)");
#endif
#ifndef PTDP_HAVE_NCCL
  if (c.comm == "nccl") usage_error("--comm nccl: this build has no NCCL communicator");
#endif

}

LossScaleConfig loss_scale_config(const RunConfig& c) {
  LossScaleConfig l;
  if (c.precision != "f16") return l;
  l.dynamic = c.loss_scale == 0;
  l.initial = l.dynamic ? c.initial_loss_scale : c.loss_scale;
  l.min_scale = std::min(c.min_loss_scale, l.initial);
  l.window = c.loss_scale_window;
  l.hysteresis = c.hysteresis;
  return l;
}

DType precision_dtype(const std::string& precision) { return parse_dtype(precision, "--precision"); }

}  // namespace ptdp
