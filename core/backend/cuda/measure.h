// Helpers for timing work on the GPU, shared by the benchmarks and `ptdp accept`: CUDA-event
// timing after an L2 flush, and filling a large device tensor from a small host block.
#pragma once
#include <algorithm>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/event_timer.h"

namespace ptdp::cuda {

// Times calls on the backend's stream with CUDA events; before each, a memset of twice the L2
// size evicts the operands from the cache (outside the timed interval).
class FlushedTiming {
 public:
  explicit FlushedTiming(Backend& be) : be_(be), timer_(cuda_stream(be)) {
    int l2 = 0;
    PTDP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, cuda_device(be)));
    flush_ = be.empty({std::max<int64_t>(2 * int64_t(l2) / 4, 1)}, DType::F32);
  }
  template <class F>
  double seconds(F&& f) {
    PTDP_CUDA_CHECK(cudaMemsetAsync(flush_.raw(), 0, flush_.nbytes(), cuda_stream(be_)));
    timer_.start();
    f();
    timer_.stop();
    return double(timer_.elapsed_ms()) / 1e3;
  }

 private:
  Backend& be_;
  EventTimer timer_;
  Tensor flush_;
};

// t (on the device) holds `block`'s values (a host tensor, converted to t's dtype) repeated
// from its first element on.
inline void fill_repeating(Backend& be, Tensor& t, const Tensor& block) {
  const int64_t n = std::min(t.numel(), block.numel());
  if (n == 0) return;
  Tensor first = t.view(0, {n});
  be.copy(first, block.view(0, {n}));  // host -> device, synchronous
  for (int64_t off = n; off < t.numel(); off += n) {
    Tensor part = t.view(off, {std::min(n, t.numel() - off)});
    be.copy(part, first.view(0, {part.numel()}));  // device -> device
  }
}

}  // namespace ptdp::cuda
