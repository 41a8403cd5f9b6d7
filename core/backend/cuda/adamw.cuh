// AdamW's update of one element (f32 state), shared by adamw (elementwise.cu) and adamw_multi
// (adamw_multi.cu) so that both compute it with the same operations.
#pragma once
#include "core/backend/cuda/device_types.cuh"

namespace ptdp::cuda {

__device__ __forceinline__ void adamw_element(float& p, float gi, float& m, float& v, float lr, float b1, float b2,
                                              float eps, float decay, float c1, float c2) {
  const float mi = b1 * m + (1.0f - b1) * gi;
  const float vi = b2 * v + (1.0f - b2) * gi * gi;
  m = mi;
  v = vi;
  const float mhat = mi * c1, vhat = vi * c2;
  p = p * decay - lr * mhat / (sqrtf(vhat) + eps);
}

}  // namespace ptdp::cuda
