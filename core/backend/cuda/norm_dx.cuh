// The second pass of a norm's backward over one row, shared by LayerNorm and RMSNorm (one warp a
// row, K elements a lane: a 16-byte pack where the rows and g allow). With x̂ = (x − m)·rstd and
// e = dy·g: dx = base + rstd·(e − e_mean − x̂·ex_mean), base being the residual stream's gradient
// or dx itself (dx +=). RMSNorm is m = 0 and e_mean = 0 (then x̂ = x·rstd and e − 0 = e exactly).
#pragma once
#include <cstdint>

#include "core/backend/cuda/device_types.cuh"

namespace ptdp::cuda {

// dxr and base may be one row (dx +=), so neither is __restrict__; the inputs are.
template <class T, int K>
__device__ __forceinline__ void norm_backward_dx_row(T* dxr, const T* base, const T* __restrict__ xr,
                                                     const T* __restrict__ dyr, const T* __restrict__ g, int64_t c,
                                                     int lane, float m, float rs, float e_mean, float ex_mean) {
  for (int64_t i = int64_t(lane) * K; i < c; i += 32 * K) {
    const Pack<T, K> xv = load_pack<K>(xr + i), dv = load_pack<K>(dyr + i), bv = load_pack<K>(base + i);
    const Pack<T, K> gv = load_pack<K>(g + i);
    Pack<T, K> out;
    for (int k = 0; k < K; ++k) {
      const float xhat = (to_f32(xv.v[k]) - m) * rs;
      const float e = to_f32(dv.v[k]) * to_f32(gv.v[k]);
      out.v[k] = from_f32<T>(to_f32(bv.v[k]) + (e - e_mean - xhat * ex_mean) * rs);
    }
    store_pack<K>(dxr + i, out);
  }
}

}  // namespace ptdp::cuda
