// Software stacks (--stack): which of Megatron's optimisations a simulated run has. The same
// layout ran 8-10% faster in Korthikanti et al. 2022 than in Narayanan et al. 2021 because the code
// changed, so the code is part of the model, chosen per experiment from what its source ran
// (docs/SIMULATOR.md, "Software stacks").
#pragma once
#include <string>
#include <vector>

#include "core/config/run_config.h"

namespace ptdp::sim {

struct SoftwareStack {
  std::string name;
  // The column-parallel layers' input-gradient all-reduce (reduce-scatter under sequence
  // parallelism) runs during the weight-gradient GEMM, and the all-gather sequence parallelism
  // redoes in backward during the input-gradient GEMM (Megatron-LM, Sept. 2021:
  // LinearWithGradAccumulationAndAsyncCommunication).
  bool tp_backward_overlap = false;
  // The weight-gradient GEMM accumulates into the main gradient buffer itself: no separate
  // accumulation pass over the parameters (--gradient-accumulation-fusion, Feb. 2022).
  bool fused_grad_accumulation = false;
  // A stage frees the data of each activation it sends once sent, keeping only its autograd
  // node (deallocate_output_tensor, Megatron-LM early 2022); before, the output was kept until the
  // micro-batch's backward.
  bool free_pipeline_outputs = false;
  // Fused (flash) attention: the s x s scores never reach memory, the causal mask skips the
  // blocks above the diagonal (half the attention FLOPs), backward recomputes the scores.
  bool flash_attention = false;
  // The longest sequence Megatron's fused causal softmax (scaled_upper_triang_masked_softmax)
  // takes; 0 where the stack does not use it (flash attention). The kernel reads only the lower
  // triangle of the scores (row i: i + 1 elements) and writes whole rows, zeros above the
  // diagonal; its backward reads the gradient and the output the same way (fused_kernels/
  // scaled_upper_triang_masked_softmax.h, v2.5 and 2022). FusedScaleMaskSoftmax calls it for
  // fp16/bf16 scores with 16 < s <= this, s % 4 == 0 and b * a/t a multiple of 4 (2022: of the
  // kernel's batches per block); otherwise PyTorch's softmax runs on the whole s x s.
  int fused_causal_softmax_max_seq = 0;
  // Every tensor-parallel all-gather and reduce-scatter is split and pipelined with the GEMM it
  // feeds or follows (Transformer Engine userbuffers, Megatron-Core --tp-comm-overlap).
  bool tp_comm_overlap = false;
  // Data-parallel gradient reduction during the backward pass (--overlap-grad-reduce).
  bool dp_overlap = false;
  // The distributed optimizer's parameter all-gather during the next forward (--overlap-param-gather).
  bool param_gather_overlap = false;
  // --zero 2 is modelled (Megatron-FSDP's optim_grads: each backward's gradients reduce-scattered on
  // the communication stream; simulator.cpp).
  bool zero2 = false;
  // Bytes of a main-gradient element reduced over the data-parallel group (0: the simulator's
  // default, fp16 as Megatron v2.5).
  int grad_bytes = 0;
  // The NCCL of the stack's container chooses its NICs as NCCL 2.8 does (NGC PyTorch 20.12, the
  // SC'21 runs): every communicator takes the first NIC of each PCIe switch that holds one of its
  // GPUs, so groups whose GPUs share a switch share that NIC and its second NIC idles; collectives
  // run as flat rings (Network::allreduce_nccl28). Later NCCL (2.12) gives each GPU its own NIC.
  bool nccl_first_nic_per_switch = false;
  // Megatron's sequence parallelism (--sequence-parallel) exists in this code (Korthikanti et al.
  // 2022 on); the SC'21 code has none.
  bool sequence_parallel = false;
  // Selective activation recomputation (--recompute-granularity selective: only the attention's
  // softmax and dropout recomputed) exists in this code; it came with sequence parallelism
  // (Korthikanti et al. 2022, Megatron-LM May 2022). The SC'21 code and Megatron-DeepSpeed of
  // 2022 checkpoint whole layers only (--checkpoint-activations).
  bool selective_recompute = false;
  // DeepSpeed's pipeline engine (Megatron-DeepSpeed with DeepSpeed 0.5.4-0.6.x, 2021-22; the
  // mechanisms, each with its source, in docs/SIMULATOR.md "DeepSpeed's pipeline engine"):
  //  - its TrainSchedule (core/sim/deepspeed_schedule.h): 1F1B's compute order, but every send
  //    and receive a blocking, unpaired NCCL transfer (a rendezvous of the two stages);
  //  - tensor parallelism's pipeline tensors partitioned: the receiver all-gathers once in forward,
  //    the gradient's receiver twice in backward (the gradient and its own output, zeroed after
  //    the forward send), each partitioned receive after a host sync;
  //  - one torch.cuda.synchronize per forward micro-batch (its ThroughputTimer);
  //  - the data-parallel all-reduce after the last micro-batch; ZeRO-1 (and bf16's BF16_Optimizer,
  //    a ZeRO-1 of its own) all-reduces too, then all-gathers the parameters;
  //  - bf16: each micro-batch's gradients added into an fp32 buffer, the tied embedding's gradient
  //    all-reduced in fp32;
  //  - no interleaving, no sequence parallelism, no fused gradient accumulation, no overlap.
  bool deepspeed_engine = false;
  // Context parallelism (--context-parallel-size): the p2p ring of key/value blocks through
  // Transformer Engine's attention, in Megatron-core since core_v0.4.0 (2023-12; --context-parallel-size,
  // commit 292543d342 of 2023-10-12).
  bool context_parallel = false;
  // The other variants of --cp-comm-type (a2a, allgather; a2a+p2p with hierarchical groups):
  // Megatron-core core_v0.10.0 (2025-02; commits 91a8a4c8dc of 2024-10-21 and 645c329d07 of
  // 2024-11-15). None of the stacks here is that recent.
  bool cp_comm_types = false;
  // ptdp's own CUDA backend (core/backend/cuda) runs the layer: its ops' kernels (ptdp_kernels.cpp),
  // no dropout, the attention core unfused with its head permutations.
  bool ptdp_kernels = false;
};

// Whether the run's bf16 training goes through DeepSpeed's BF16_Optimizer (megatron-deepspeed):
// fp32 gradient accumulation, the fp32 optimizer state sharded over d as ZeRO-1 does.
inline bool bf16_optimizer(const SoftwareStack& s, Precision precision) {
  return s.deepspeed_engine && precision == Precision::Bf16;
}

// Whether the run's attention softmax is Megatron's fused causal kernel
// (stack.fused_causal_softmax_max_seq and FusedScaleMaskSoftmax.is_kernel_available): fp16 or
// bf16 scores, 16 < s <= that length, s a multiple of 4, and b * a/t a multiple of 4 (the 2022
// code: of the kernel's batches per block, 8 where s <= 128).
bool fused_causal_softmax(const SoftwareStack& s, const RunConfig& cfg);

// megatron-2021 (the SC'21 paper's code: none of the above), megatron-2022 (Korthikanti et al.:
// asynchronous TP communication in backward, fused gradient accumulation), mcore (Megatron-Core
// r0.8, 2024: all of them, fp32 gradients), megatron-deepspeed (Megatron-DeepSpeed on DeepSpeed's
// pipeline engine, 2022: the 2021 kernels, DeepSpeed's schedule and gradient handling), ptdp
// (ptdp's own executor on its CUDA backend).
SoftwareStack software_stack(StackKind kind);

// The run's stack (as software_stack(cfg.stack)) after checking that it has what the run asks
// for: UsageError naming both flags for --sequence-parallel, --recompute selective or
// --context-parallel-size (and a --cp-comm-type) under a stack without it (megatron-2021, megatron-deepspeed), under megatron-deepspeed for a schedule other than
// 1f1b, --zero 3 with a pipeline, and bf16 without --zero 1 where d > 1 (DeepSpeed's
// BF16_Optimizer shards), and --zero 3 under ptdp (the ZeRO-3 replay is DeepSpeed's engine). stack_refusal gives that message, empty when the stack runs cfg.
SoftwareStack checked_stack(const RunConfig& cfg);
std::string stack_refusal(const RunConfig& cfg);

}  // namespace ptdp::sim
