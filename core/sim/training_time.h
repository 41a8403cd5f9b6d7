// Training time estimates from throughput: the paper's Eq. (4).
#pragma once

namespace ptdp::sim {

// Eq. (4) of the paper: end-to-end training time ~ 8 T P / (n X) for T tokens, P parameters, n
// GPUs each achieving X FLOP/s (Eq. (3) accounting, with recomputation); in days. The paper derives
// it from Eq. (3) with 6h >> s, 16lh >> V + s and 12lh >> V, so it is 2-3% below T F_token / (n X)
// for its models.
inline double training_days_eq4(double tokens, double params, double gpus, double flops_per_gpu) {
  return 8.0 * tokens * params / (gpus * flops_per_gpu) / 86400.0;
}

}  // namespace ptdp::sim
