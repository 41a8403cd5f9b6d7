// The precision and overlap settings of today's Megatron-core as the simulator reads them
// (--grad-reduce-in-bf16, the precision-aware optimizer's state dtypes, and
// --overlap-param-gather-with-optimizer-step): one accessor over the run's config.
#pragma once
#include "core/config/run_config.h"

namespace ptdp::sim {

struct PrecisionKnobs {
  bool grad_reduce_bf16 = false;  // the data-parallel reduction moves bf16 gradients
  // Bytes of an element of the optimizer's state (--main-params-dtype, --main-grads-dtype,
  // --exp-avg-dtype, --exp-avg-sq-dtype; fp32 unless the precision-aware optimizer says otherwise).
  double main_param_bytes = 4, main_grad_bytes = 4, exp_avg_bytes = 4, exp_avg_sq_bytes = 4;
  // The first model chunk's parameter all-gather dispatched right after its optimizer step,
  // beside the other chunks' steps (interleaved schedule, distributed optimizer).
  bool overlap_param_gather_with_optimizer_step = false;
  // Adam's sharded state per parameter: master weight, m, v (12 in fp32).
  double adam_state_bytes() const { return main_param_bytes + exp_avg_bytes + exp_avg_sq_bytes; }
};

// The knobs `cfg` sets (RunConfig::grad_reduce_bf16 and overlap_param_gather_with_optimizer_step,
// OptimizerConfig's state dtypes).
PrecisionKnobs precision_knobs(const RunConfig& cfg);

}  // namespace ptdp::sim
