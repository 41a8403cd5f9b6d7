// The cost model: per-device time of one micro-batch through a transformer layer, the embedding
// and the output layer (the kernel lists of kernels.h, summed by kind and pass), of pipeline sends,
// and of the data-parallel all-reduce and the optimizer step. Megatron-LM as of the paper (v2.5):
// fp16 with fp32 master weights, fused softmax / bias-GeLU / bias-dropout-add, no fused gradient
// accumulation; the later code's optimisations (stack.h) and sequence parallelism where the run
// has them; or ptdp's own CUDA backend (--stack ptdp).
#pragma once
#include <array>
#include <string>

#include "core/model/config.h"
#include "core/model/tensor_inventory.h"
#include "core/config/run_config.h"
#include "core/sim/hardware.h"
#include "core/sim/kernels.h"
#include "core/sim/network.h"
#include "core/sim/precision_knobs.h"
#include "core/sim/stack.h"

namespace ptdp::sim {

// How ZeRO-3 runs (--zero 3): DeepSpeed's stage-3 engine as the paper compared against it
// (DeepSpeed 0.3/0.4, 2021; docs/SIMULATOR.md). Defaults: DeepSpeed's documented defaults, but for
// contiguous_checkpoints (off in DeepSpeed, on in its ZeRO-3 example for Megatron).
struct Zero3Options {
  double prefetch_bucket = 5e7;        // stage3_prefetch_bucket_size: elements fetched ahead of use
  double max_reuse_distance = 1e9;     // stage3_max_reuse_distance: keep a gathered parameter that is
                                       // used again within this many elements of other parameters
  double persistence_threshold = 1e5;  // stage3_param_persistence_threshold: smaller tensors are not
                                       // partitioned (biases, LayerNorms)
  double reduce_bucket = 5e8;          // reduce_bucket_size: gradient elements per reduce-scatter
  // true: each rank's shard traffic crosses its own NIC (flat rings over the data-parallel group,
  // what the paper's ZeRO-3 runs achieved); false: NCCL's node-aware rings, a node's traffic spread
  // over all its NICs.
  bool flat_collectives = true;
  // activation_checkpointing.contiguous_memory_optimization (with partition_activations, which it
  // requires): each layer's checkpointed input is copied into one buffer preallocated for every
  // layer, so the checkpoints take no allocator overhead. On, as in DeepSpeed's own ZeRO-3 example
  // for Megatron (DeepSpeedExamples Megatron-LM-v1.1.5-ZeRO3, ds_pretrain_gpt2-zero3.sh: PA, CC
  // true); its cpu_checkpointing is not modelled (docs/SIMULATOR.md, Table 2).
  bool contiguous_checkpoints = true;
};

// How the software behaves (defaults: Megatron-LM v2.5, the paper's runs).
struct SimOptions {
  bool p2p_sync = true;     // a sender waits for its send to finish (batch_isend_irecv + synchronize)
  bool dp_overlap = false;  // overlap the data-parallel all-reduce with the backward pass (or
                            // RunConfig::overlap_grad_reduce)
  int grad_bytes = 2;       // bytes of a gradient element in the all-reduce buffer (fp16 main_grad)
  Zero3Options zero3;
};

// Seconds by kind of work.
struct PassCost {
  double gemm = 0;       // dense layer GEMMs
  double attention = 0;  // batched attention GEMMs (Q K^T, P V)
  double membound = 0;   // element-wise, normalisation, softmax, copies, gradient accumulation
  double tp_comm = 0;    // tensor-parallel all-reduces
  double total() const { return gemm + attention + membound + tp_comm; }
  void add(KernelKind kind, double seconds);
  PassCost& operator+=(const PassCost& o);
  PassCost operator*(double f) const;
};

// One layer, one micro-batch, one device.
struct LayerCosts {
  PassCost forward, recompute, backward;  // backward without the recomputation
};

// A layer split by the modules that own its four weight matrices (LayerModule: what ZeRO-3
// gathers one at a time): QKV (with LayerNorm 1 and the core attention), the output projection
// (with its bias-dropout-add and LayerNorm 2), fc (with GeLU) and fc2 (with its bias-dropout-add).
// A kernel counts in the module whose forward or backward runs it; the four add up to LayerCosts
// exactly.
struct ModuleCosts {
  PassCost forward, recompute, backward;
  // The part of each pass that runs before the module's weights are needed (in the forward
  // LayerNorm 1 before QKV; in the backward the bias-dropout-add and LayerNorm backwards before fc2
  // and the projection, the core attention's before QKV): where ZeRO-3 waits for its gather.
  PassCost forward_pre, recompute_pre, backward_pre;
  double weights = 0;  // elements of the module's weight matrix on one device
  double biases = 0;   // its bias and LayerNorm elements (each tensor below ~1e5 elements)
};

// The parts of the first and last stage outside the layers.
struct EdgeCosts {
  PassCost embed_forward, embed_backward;  // word + position embedding (stage 0, chunk 0)
  PassCost head_forward, head_backward;    // final LayerNorm, logits, cross-entropy (last stage)
};

// Bytes per parameter of ptdp's own optimizer step (--stack ptdp; cost_model.cpp says which passes),
// with its f32 gradient of `grad_bytes` and the run's element size `elem`.
double ptdp_optimizer_bytes_per_param(const RunConfig& cfg, const PrecisionKnobs& knobs, double grad_bytes,
                                      double elem);

// Everything the simulator needs that does not depend on the schedule.
struct CostModel {
  CostModel(const RunConfig& cfg, const HardwareProfile& hw, const SimOptions& opt = {});

  // The kernels of one micro-batch (kernels.h): a layer's, the embedding's and the output layer's,
  // and what costing one takes; `layer`, `modules` and `edges` are their sums.
  KernelList kernels;
  KernelCosting costing() const;
  // The sum of the kernels of `where` in `phase` as `layer` and `edges` hold it (zero for the
  // embedding's and the output layer's recomputation, which they have none of).
  PassCost pass_cost(Where where, Phase phase) const;
  LayerCosts layer;
  std::array<ModuleCosts, kLayerModules> modules;  // `layer` split by module
  EdgeCosts edges;
  double act_bytes = 0;            // b*s*h elements of the pipeline's activation, in bytes
  double send_bytes = 0;           // of it, what one rank sends (1/t with scatter/gather or sequence parallelism)
  double send_cross = 0, send_local = 0;  // one pipeline send, across nodes / inside a node
  double gather = 0;               // the receiver's all-gather (scatter/gather), 0 when off
  // DeepSpeed's engine (stack.deepspeed_engine), else 0: the small meta message sent before each
  // partitioned pipeline tensor (across nodes / inside a node), and what one host sync costs.
  double meta_cross = 0, meta_local = 0;
  double host_sync = 0;
  ModelTensors tensors;            // the model's parameters, the vocabulary padded for t
  double params_per_layer = 0;     // on one device (tensor-parallel shard)
  double params_embedding = 0;     // word embedding shard (and its copy on the last stage)
  double params_position = 0;
  double optimizer_bytes_per_param = 0;
  // The data-parallel parameter all-gather left exposed after the step (--zero 1): under
  // --overlap-param-gather the next forward's first micro-batch (`first_forward` seconds) hides
  // up to that much; with --overlap-param-gather-with-optimizer-step the first chunk's share is
  // dispatched after its own step and runs beside the other chunks' (`optim` seconds in all).
  double exposed_param_gather(double params, double optim, double first_forward) const;

  double dp_allreduce(double params) const;  // the data-parallel gradient all-reduce
  // --zero 1 (Megatron's distributed optimizer): the gradients reduce-scattered over the
  // data-parallel group instead, and the updated parameters all-gathered after the step.
  double dp_reduce_scatter(double params) const;
  double dp_allgather(double params) const;
  // The data-parallel gradient reduction a stage of `params` runs after its last backward: the
  // all-reduce, or --zero 1's reduce-scatter (DeepSpeed's ZeRO-1 and BF16_Optimizer all-reduce,
  // the latter with fp32 -> bf16 -> fp32 copies around it); under --zero 2 every backward runs it.
  double dp_reduction(double params) const;
  // The data-parallel collectives follow NCCL 2.8's NIC choice (the stack's, on a profile that
  // names its PCIe switches: network.h).
  bool shared_nics() const;
  double embedding_allreduce() const;        // tied embedding gradients, first and last stage (gpt)
  double optimizer_step(double params) const;
  double model_parallel_sync() const;        // grad-norm and inf checks across the model-parallel group
  // Node of a stage's first rank (Megatron order: tensor, then data, then pipeline ranks).
  int node_of_stage(int stage) const;
  bool cross_node(int from_stage, int to_stage) const;

  const HardwareProfile& hw;
  Network net;
  RunConfig cfg;
  SimOptions opt;
  SoftwareStack stack;  // cfg.stack
  double peak = 0;  // FLOP/s in the run's precision
  int grad_bytes = 2;  // of a gradient element in the data-parallel reduction (the stack's, else opt's)
  int tied_grad_bytes = 2;  // of one in the tied embedding's all-reduce
  int elem = 2;     // bytes per element
  // Bytes per parameter of the distributed optimizer's all-gather: elem, or with --fp8-param-gather
  // 1 for the layers' weights and elem for the rest, averaged over the model's parameters.
  double gather_elem = 2;
  PrecisionKnobs knobs;  // the run's (precision_knobs)
};

}  // namespace ptdp::sim
