#include "core/sim/stack.h"

#include <fmt/format.h>

#include "core/backend/attention_choice.h"
#include "core/common/error.h"
#include "core/config/run_config.h"

namespace ptdp::sim {

SoftwareStack software_stack(StackKind kind) {
  SoftwareStack s;
  s.name = enum_name(kind);
  if (kind == StackKind::Megatron2021) {
    s.nccl_first_nic_per_switch = true;
    s.fused_causal_softmax_max_seq = 2048;  // v2.5 fused_softmax.py: key_seq_len <= 2048
    return s;
  }
  if (kind == StackKind::Megatron2022 || kind == StackKind::Mcore) {
    s.tp_backward_overlap = true;
    s.fused_grad_accumulation = true;
    s.free_pipeline_outputs = true;
    s.sequence_parallel = true;
    s.selective_recompute = true;
    // Fused accumulation needs fp32 main gradients: Megatron-LM of 2022 turns
    // --gradient-accumulation-fusion off unless --accumulate-allreduce-grads-in-fp32 is set
    // (megatron/arguments.py, May 2022: "supported only with fp32 gradient accumulation"), so
    // the data-parallel all-reduce moves fp32 gradients under both stacks.
    s.grad_bytes = 4;
    if (kind == StackKind::Megatron2022) {
      s.fused_causal_softmax_max_seq = 4096;  // fused_softmax.py of May 2022: 16 < sk <= 4096
      return s;
    }
    s.flash_attention = true;
    s.context_parallel = true;  // r0.8: the p2p ring only
    s.tp_comm_overlap = true;
    s.dp_overlap = true;
    s.param_gather_overlap = true;
    s.zero2 = true;
    return s;
  }
  if (kind == StackKind::MegatronDeepspeed) {
    // Megatron-DeepSpeed's model code is Megatron-LM v2.4-2.5's (fused softmax, bias-GeLU and
    // bias-dropout-add; nothing of 2022): none of the flags above. PyTorch 1.11 (BLOOM's) ships
    // NCCL 2.10, which gives each GPU its own NIC: not nccl_first_nic_per_switch.
    s.deepspeed_engine = true;
    s.fused_causal_softmax_max_seq = 4096;  // its fused_softmax.py (2022): 16 < sk <= 4096
    return s;
  }
  // StackKind::Ptdp, ptdp's executor: weight gradients accumulate into f32 buffers inside the
  // weight-gradient GEMM (reduced over the data-parallel group in f32), a sent activation is dropped
  // once sent, and sequence parallelism and selective recomputation exist; its collectives block,
  // beside no GEMM.
  s.ptdp_kernels = true;
  s.fused_grad_accumulation = true;
  s.grad_bytes = 4;
  s.free_pipeline_outputs = true;
  s.sequence_parallel = true;
  s.selective_recompute = true;
  return s;
}

bool fused_causal_softmax(const SoftwareStack& s, const RunConfig& cfg) {
  const int seq = cfg.model.seq_length;
  const bool half = cfg.precision != Precision::F32;
  if (s.flash_attention || !half || seq <= 16 || seq > s.fused_causal_softmax_max_seq || seq % 4 != 0) return false;
  const int heads = cfg.model.heads / cfg.par.tp;
  const int per_block = s.fused_causal_softmax_max_seq > 2048 && seq <= 128 ? 8 : 4;
  return (cfg.par.micro_batch * heads) % per_block == 0;
}

namespace {

// What the stack's context parallelism cannot run (empty: nothing to refuse).
std::string cp_refusal(const RunConfig& cfg, const SoftwareStack& s) {
  const ParallelConfig& p = cfg.par;
  if (p.cp <= 1) return {};
  if (s.ptdp_kernels)
    return fmt::format("--context-parallel-size {}: --stack ptdp has no context-parallel model in the simulator "
                       "(its kernel list is ptdp's unfused attention); choose --stack mcore for Megatron-core's, or "
                       "--context-parallel-size 1",
                       p.cp);
  if (!s.context_parallel)
    return fmt::format("--context-parallel-size {}: --stack {} has no context parallelism (it came to Megatron-core "
                       "in core_v0.4.0, December 2023); choose --stack mcore, or --context-parallel-size 1",
                       p.cp, cfg.stack);
  if (p.cp_comm != CpComm::P2P && !s.cp_comm_types)
    return fmt::format("--cp-comm-type {}: --stack {} (Megatron-Core r0.8, 2024) has only the p2p ring; a2a and "
                       "allgather came with core_v0.10.0 (February 2025); use --cp-comm-type p2p",
                       p.cp_comm, cfg.stack);
  if (p.zero == 3)
    return fmt::format("--zero 3 with --context-parallel-size {}: the ZeRO-3 replay has no context parallelism; use "
                       "--zero 0 or 1",
                       p.cp);
  return {};
}

// --attention-backend: ptdp's choices are modelled under --stack ptdp, auto as unfused (what ptdp
// runs without cuDNN: the simulator cannot know whether the machine has it); every other stack
// runs its own attention, which the flag may name.
std::string attention_refusal(const RunConfig& cfg, const SoftwareStack& s) {
  const AttentionBackend a = cfg.attention_backend;
  if (a == AttentionBackend::Auto) return {};
  if (!s.ptdp_kernels) {
    const AttentionBackend own = s.flash_attention ? AttentionBackend::Cudnn : AttentionBackend::Unfused;
    if (a == own) return {};
    return fmt::format("--attention-backend {}: --stack {} runs its own attention ({}); the flag chooses ptdp's "
                       "kernels under --stack ptdp; use auto or {} here",
                       a, s.name,
                       s.flash_attention ? "Transformer Engine's fused attention: cudnn" : "the scores materialised: unfused",
                       own);
  }
  if (a == AttentionBackend::Flash)
    return "--attention-backend flash: ptdp's flash kernel (scalar f32 arithmetic, no tensor cores) has no rate in "
           "the performance model until a GPU has measured it (scripts/gpu_session.sh's attention stages); use cudnn "
           "or unfused";
  const int hd = cfg.model.hidden / cfg.model.heads;
  // ptdp's flash kernel runs the blocks cuDNN is not asked for.
  if (a == AttentionBackend::Cudnn && !cudnn_takes_heads(precision_dtype(cfg.precision), hd))
    return fmt::format("--attention-backend cudnn: cuDNN's fused attention takes bf16 or f16 heads of a multiple of "
                       "8 up to 256 (here {}, {}); ptdp runs its flash kernel instead, which the performance model "
                       "has no rate for",
                       cfg.precision, hd);
  return {};
}

}  // namespace

std::string stack_refusal(const RunConfig& cfg) {
  const StackKind name = cfg.stack;
  const SoftwareStack s = software_stack(name);
  const ParallelConfig& p = cfg.par;
  if (std::string cp = cp_refusal(cfg, s); !cp.empty()) return cp;
  if (std::string attention = attention_refusal(cfg, s); !attention.empty()) return attention;
  if (cfg.fp8_format != Fp8Format::None && name != StackKind::Mcore)
    return fmt::format("--fp8-format {}: --stack {} has no FP8 model (FP8 is Transformer Engine's, modelled for "
                       "Megatron-core); choose --stack mcore, or leave out --fp8-format",
                       cfg.fp8_format, name);
  if (cfg.fp8_param_gather && cfg.fp8_format == Fp8Format::None)
    return "--fp8-param-gather keeps the weights in FP8 for the FP8 GEMMs: it needs --fp8-format e4m3 or hybrid";
  if (cfg.fp8_format != Fp8Format::None && cfg.precision == Precision::F32)
    return fmt::format("--fp8-format {}: FP8 runs beside 16-bit activations and weights; use --precision bf16",
                       cfg.fp8_format);
  if (p.sequence_parallel && !s.sequence_parallel)
    return fmt::format("--sequence-parallel: --stack {} has no sequence parallelism (it came with Korthikanti et al. "
                       "2022 to Megatron-LM); choose --stack megatron-2022 or mcore, or leave out --sequence-parallel",
                       name);
  if (p.recompute == Recompute::Selective && !s.selective_recompute)
    return fmt::format("--recompute selective: --stack {} has no selective recomputation (it came with Korthikanti et "
                       "al. 2022 to Megatron-LM, with sequence parallelism); choose --stack megatron-2022 or mcore, "
                       "or --recompute full or none",
                       name);
  if (p.recompute_activation && !s.ptdp_kernels)
    return fmt::format("--recompute-activation: --stack {} keeps the MLP's activation output for fc2's weight gradient "
                       "(the flag is ptdp's executor's); choose --stack ptdp, or leave out --recompute-activation",
                       name);
  if (p.zero == 2 && !s.zero2)
    return fmt::format("--zero 2: --stack {} has no ZeRO-2 model; the simulator's ZeRO-2 is Megatron-FSDP's "
                       "optim_grads under --stack mcore (each micro-batch's gradients reduce-scattered on the "
                       "communication stream during the backward); use --zero 0 or 1, or --stack mcore",
                       name);
  if (s.ptdp_kernels && p.zero == 3)
    return fmt::format("--zero 3: --stack {} has no ZeRO-3 model: the simulator's ZeRO-3 is DeepSpeed's stage-3 "
                       "engine, not ptdp's own; use --zero 0 or 1, or a Megatron --stack",
                       name);
  if (!s.deepspeed_engine) return {};
  if (p.schedule != ScheduleKind::OneFOneB)
    return fmt::format("--schedule {}: --stack {} runs DeepSpeed's pipeline engine, whose only training schedule is "
                       "its TrainSchedule (1F1B's order; no interleaving, no GPipe); use --schedule 1f1b",
                       p.schedule, name);
  if (p.zero == 3 && p.pp > 1)
    return fmt::format("--zero 3: --stack {} runs DeepSpeed's pipeline engine, which refuses ZeRO-2 and ZeRO-3 with "
                       "a pipeline; use --zero 0 or 1, or --pp 1",
                       name);
  if (bf16_optimizer(s, cfg.precision) && p.zero != 1 && p.dp > 1)
    return fmt::format("--precision bf16 with --zero {}: --stack {} trains bf16 with DeepSpeed's BF16_Optimizer, "
                       "which shards the fp32 optimizer state over the data-parallel group as ZeRO-1 does; use "
                       "--zero 1",
                       p.zero, name);
  return {};
}

SoftwareStack checked_stack(const RunConfig& cfg) {
  const std::string refusal = stack_refusal(cfg);
  if (!refusal.empty()) usage_error("{}", refusal);
  return software_stack(cfg.stack);
}

}  // namespace ptdp::sim
