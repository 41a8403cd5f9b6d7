// The cost model: per-device time of every operation of one micro-batch through a transformer
// layer (GEMMs, attention, memory-bound kernels, tensor-parallel all-reduces, recomputation), of
// the embedding and the output layer, of pipeline sends, and of the data-parallel all-reduce and
// the optimizer step. Mirrors Megatron-LM as of the paper (v2.5): fp16 with fp32 master weights,
// fused softmax / bias-GeLU / bias-dropout-add, no fused gradient accumulation.
#pragma once
#include <string>

#include "core/model/config.h"
#include "core/runtime/run_config.h"
#include "core/sim/hardware.h"
#include "core/sim/network.h"

namespace ptdp::sim {

// How the software behaves (defaults: Megatron-LM v2.5, the paper's runs).
struct SimOptions {
  bool p2p_sync = true;     // a sender waits for its send to finish (batch_isend_irecv + synchronize)
  bool dp_overlap = false;  // overlap the data-parallel all-reduce with the backward pass (or
                            // RunConfig::overlap_grad_reduce)
  int grad_bytes = 2;       // bytes of a gradient element in the all-reduce buffer (fp16 main_grad)
};

// Seconds by kind of work.
struct PassCost {
  double gemm = 0;       // dense layer GEMMs
  double attention = 0;  // batched attention GEMMs (Q K^T, P V)
  double membound = 0;   // element-wise, normalisation, softmax, copies, gradient accumulation
  double tp_comm = 0;    // tensor-parallel all-reduces
  double total() const { return gemm + attention + membound + tp_comm; }
  PassCost& operator+=(const PassCost& o);
  PassCost operator*(double f) const;
};

// One layer, one micro-batch, one device.
struct LayerCosts {
  PassCost forward, recompute, backward;  // backward without the recomputation
};

// The parts of the first and last stage outside the layers.
struct EdgeCosts {
  PassCost embed_forward, embed_backward;  // word + position embedding (stage 0, chunk 0)
  PassCost head_forward, head_backward;    // final LayerNorm, logits, cross-entropy (last stage)
};

// Everything the simulator needs that does not depend on the schedule.
struct CostModel {
  CostModel(const RunConfig& cfg, const HardwareProfile& hw, const SimOptions& opt = {});

  LayerCosts layer;
  EdgeCosts edges;
  double act_bytes = 0;            // b*s*h elements of the pipeline's activation, in bytes
  double send_cross = 0, send_local = 0;  // one pipeline send, across nodes / inside a node
  double gather = 0;               // the receiver's all-gather (scatter/gather), 0 when off
  double params_per_layer = 0;     // on one device (tensor-parallel shard)
  double params_embedding = 0;     // word embedding shard (and its copy on the last stage)
  double params_position = 0;
  double optimizer_bytes_per_param = 0;

  double dp_allreduce(double params) const;  // the data-parallel gradient all-reduce
  double embedding_allreduce() const;        // tied embedding gradients, first and last stage
  double optimizer_step(double params) const;
  double model_parallel_sync() const;        // grad-norm and inf checks across the model-parallel group
  // Node of a stage's first rank (Megatron order: tensor, then data, then pipeline ranks).
  int node_of_stage(int stage) const;
  bool cross_node(int from_stage, int to_stage) const;

  const HardwareProfile& hw;
  Network net;
  RunConfig cfg;
  SimOptions opt;
  double peak = 0;  // FLOP/s in the run's precision
  int elem = 2;     // bytes per element
};

// Achieved time of one GEMM (batch of m x n x k products) on the profile.
double gemm_time(const HardwareProfile& hw, double peak, int elem, double m, double n, double k, double batch = 1);

}  // namespace ptdp::sim
