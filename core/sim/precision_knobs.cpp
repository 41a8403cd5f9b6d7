#include "core/sim/precision_knobs.h"

#include "core/tensor/dtype.h"

namespace ptdp::sim {

PrecisionKnobs precision_knobs(const RunConfig& cfg) {
  PrecisionKnobs k;
  k.grad_reduce_bf16 = cfg.grad_reduce_bf16;
  k.overlap_param_gather_with_optimizer_step = cfg.overlap_param_gather_with_optimizer_step;
  k.main_param_bytes = double(dtype_size(cfg.opt.main_params_dtype));
  k.main_grad_bytes = double(dtype_size(cfg.opt.main_grads_dtype));
  k.exp_avg_bytes = double(dtype_size(cfg.opt.exp_avg_dtype));
  k.exp_avg_sq_bytes = double(dtype_size(cfg.opt.exp_avg_sq_dtype));
  return k;
}

}  // namespace ptdp::sim
