// Memory per device: weights, gradients and optimizer state, the activations the schedule keeps
// in flight (per recompute mode), working sets and reserved memory; predicts out-of-memory.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/sim/cost_model.h"
#include "core/sim/hardware.h"
#include "core/sim/precision_knobs.h"

namespace ptdp::sim {

// Bytes of state per parameter. Mixed precision (f16/bf16), as Megatron v2.5: fp16 weight 2,
// fp16 gradient buffer 2, fp32 master weight 4, fp32 master gradient 4 (kept between steps),
// Adam m and v 8: 20. f32: weight, gradient, m, v: 16.
double state_bytes_per_param(Precision precision);
// The same with sharded data parallelism over d ranks, per parameter of the model (or stage):
// --zero 1 (distributed optimizer) keeps the fp16 weight and gradient buffer and 1/d of the rest
// (fp32 master weight and gradient, Adam m and v): 4 + 16/d (f32: 8 + 8/d); --zero 2 the weight and
// 1/d of the rest: 2 + 18/d (f32: 4 + 12/d; Rajbhandari et al. 2020's P_os+g); --zero 3 keeps 1/d
// of everything: 20/d (f32: 16/d).
double state_bytes_per_param(Precision precision, int zero, int dp);

// Bytes of state per parameter of the run's stack at the two moments an iteration can peak.
// Megatron, mixed precision (docs/user-guide/features/dist_optimizer.md's table: fp16 parameters
// and gradients 20, 4 + 16/d distributed; bf16 parameters with fp32 gradients 18, 6 + 12/d):
//  - fp32 main gradients (bf16, which sets --accumulate-allreduce-grads-in-fp32, and every stack
//    with stack.grad_bytes 4): the contiguous fp32 buffer lives for the run and is the master
//    gradient itself (main_grad.float() returns it): the table's 18 / 6 + 12/d at both moments.
//  - fp16 main gradients (v2.5's fp16 runs: no contiguous buffer): the optimizer step makes the
//    fp32 master gradients (main_param.grad = main_grad.float()) and train_step's
//    optimizer.zero_grad(set_to_none=True) frees them before the next forward (6985e58938
//    megatron/training.py train_step, optimizer.py zero_grad): 4/d bytes fewer while
//    activations are alive.
//  - ZeRO-3 (DeepSpeed's stage 3, mixed precision): the shard's fp32 gradient is made in the step
//    and dropped after (stage3.py _prepare_fp32_grad_for_sub_group): 16/d, then 20/d.
// DeepSpeed's BF16_Optimizer and f32 as state_bytes_per_param; ptdp: ptdp_memory.h.
struct StateBytes {
  double backward = 0;  // during the forward and backward passes, beside the activations
  double step = 0;      // during the gradient reduction and the optimizer step (activations freed)
};
StateBytes state_bytes(const RunConfig& cfg);
// The same under explicit precision knobs (precision_knobs.h): the gradient buffer in bf16 with
// --grad-reduce-in-bf16, the master weight and Adam's moments in their dtypes (sharded over d
// with --zero 1), the master gradient's own copy (its dtype, made in the step) where it differs
// from the buffer's.
StateBytes state_bytes(const RunConfig& cfg, const PrecisionKnobs& knobs);

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
  double state = 0;        // their weights, gradients and optimizer state during the passes
  double step_state = 0;   // the same during the optimizer step, when no activation is alive
  double activations = 0;  // kept for backward at the peak, with the allocator overhead
  double working = 0;      // transient working set (one layer's backward, the logits)
  double reserved = 0;     // context, communicator buffers, workspaces
  int in_flight = 0;       // (micro-batch, chunk) pairs held at the peak
  // What the allocator hands out at the peak: the passes' moment or the optimizer step's.
  double in_use() const { return std::max(state + activations + working, step_state); }
  double total() const { return in_use() + reserved; }
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
