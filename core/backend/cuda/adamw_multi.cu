// adamw_multi: gradient scaling, AdamW and the rounding of the updated weights into the model's
// low-precision copy, for a table of segments of flat buffers in one launch (instead of a scale_,
// an adamw and a copy kernel per segment). Each element is computed as those three kernels do
// (adamw.cuh), so the results are bit for bit theirs.
#include "core/backend/cuda/adamw.cuh"
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

constexpr int kThreads = 256;

// Every thread walks every segment of the table with a grid-stride loop (coalesced per segment).
template <class L>
__global__ void adamw_multi_kernel(float* __restrict__ p, float* __restrict__ g, float* __restrict__ m,
                                   float* __restrict__ v, L* __restrict__ lowp, AdamWTable t, float lr, float b1,
                                   float b2, float eps, float c1, float c2, float grad_scale, bool scale) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int k = 0; k < t.count; ++k) {
    const AdamWTable::Entry& e = t.entry[k];
    float* pk = p + e.param;
    float* gk = g + e.grad;
    float* mk = m + e.state;
    float* vk = v + e.state;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < e.size; i += stride) {
      float gi = gk[i];
      if (scale) {
        gi = gi * grad_scale;
        gk[i] = gi;
      }
      float pi = pk[i], mi = mk[i], vi = vk[i];
      adamw_element(pi, gi, mi, vi, lr, b1, b2, eps, e.decay, c1, c2);
      mk[i] = mi;
      vk[i] = vi;
      pk[i] = pi;
      if (lowp) lowp[e.lowp + i] = from_f32<L>(pi);
    }
  }
}

}  // namespace

void adamw_multi(float* p, float* g, float* m, float* v, void* lowp, DType lowp_dt, const AdamWTable& t, float lr,
                 float beta1, float beta2, float eps, float c1, float c2, double grad_scale, cudaStream_t st) {
  int64_t largest = 0;
  for (int k = 0; k < t.count; ++k) largest = t.entry[k].size > largest ? t.entry[k].size : largest;
  if (largest == 0) return;
  dispatch_float(lowp ? lowp_dt : DType::F32, "adamw_multi", [&](auto z) {
    using L = decltype(z);
    PTDP_LAUNCH(grid_for(largest, kThreads), kThreads, 0, st, adamw_multi_kernel<L>)
    (p, g, m, v, static_cast<L*>(lowp), t, lr, beta1, beta2, eps, c1, c2, static_cast<float>(grad_scale),
     grad_scale != 1.0);
    PTDP_CUDA_CHECK_LAUNCH("adamw_multi_kernel");
  });
}

}  // namespace ptdp::cuda
