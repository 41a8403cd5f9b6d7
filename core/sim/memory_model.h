// Memory per device: weights, gradients and optimizer state, the activations the schedule keeps
// in flight (per recompute mode), working sets and reserved memory; predicts out-of-memory.
#pragma once
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/sim/cost_model.h"
#include "core/sim/hardware.h"

namespace ptdp::sim {

// Bytes of state per parameter. Mixed precision (f16/bf16), as Megatron v2.5: fp16 weight 2,
// fp16 gradient buffer 2, fp32 master weight 4, fp32 master gradient 4 (kept between steps),
// Adam m and v 8: 20. f32: weight, gradient, m, v: 16.
double state_bytes_per_param(Precision precision);
// The same with sharded data parallelism over d ranks, per parameter of the model (or stage):
// --zero 1 (distributed optimizer) keeps the fp16 weight and gradient buffer and 1/d of the rest
// (fp32 master weight and gradient, Adam m and v): 4 + 16/d (f32: 8 + 8/d); --zero 3 keeps 1/d of
// everything: 20/d (f32: 16/d).
double state_bytes_per_param(Precision precision, int zero, int dp);

// Activations one layer keeps for its backward, per micro-batch, on one device (Korthikanti et
// al. 2022, without sequence parallelism): none: sbh(4E + 2 + 12E/t) + (2E+1) a s^2 b / t;
// selective: the attention scores are recomputed; full: the layer input only (E sbh). llama: no
// dropout masks and no dropout output, SwiGLU's 3f wide inputs instead of 8h:
// sbh(4E + (4E + 3E f/h)/t) + E a s^2 b / t. Sequence parallelism divides the first term (and full
// recomputation's input) by t too: Korthikanti's sbh(34/t + 5as/(ht)) at E = 2. Flash attention
// (the mcore stack) keeps 4 a s b / t bytes of softmax statistics instead of the scores.
double layer_activation_bytes(const RunConfig& cfg, Recompute mode);

// Most (micro-batch, chunk) forwards whose backward has not run yet, on `stage`.
int peak_in_flight(const RunConfig& cfg, int stage);

struct StageMemory {
  double params = 0;       // parameters held by the device
  double state = 0;        // their weights, gradients and optimizer state
  double activations = 0;  // kept for backward at the peak, with the allocator overhead
  double working = 0;      // transient working set (one layer's backward, the logits)
  double reserved = 0;     // context, communicator buffers, workspaces
  int in_flight = 0;       // (micro-batch, chunk) pairs held at the peak
  double total() const { return state + activations + working + reserved; }
};

struct MemoryVerdict {
  std::vector<StageMemory> stages;
  int zero = 0, dp = 1;  // the state is sharded over dp ranks when zero > 0
  int worst_stage = 0;
  double peak = 0;      // bytes, the worst stage
  double capacity = 0;  // bytes per device
  bool fits = true;
  std::string describe(const std::string& device) const;  // one line with the numbers
};

// `in_flight[stage]`: from peak_in_flight (or a replay); empty: computed here. With --zero 3 the
// working set also holds the gathered parameters and reduce buckets (zero3_gathered_bytes, `z3`).
MemoryVerdict memory_verdict(const RunConfig& cfg, const HardwareProfile& hw, std::vector<int> in_flight = {},
                             const Zero3Options& z3 = {});

}  // namespace ptdp::sim
