// The CUDA backend: every Backend call on one GPU, queued on the backend's own non-blocking
// stream (several backends may share a GPU, one per thread rank). GEMMs go through cuBLASLt,
// the rest through fused kernels; device memory comes from the GPU's caching allocator
// (device_allocator.h). Compute dtypes f32, bf16 and f16 under the dtype rules of backend.h;
// f64 is refused. Host <-> device copies are synchronous; everything else is asynchronous
// until synchronize(), a copy to the host, sum() or sum_squares().
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "core/backend/backend.h"

namespace ptdp {

// Throws RuntimeError (with the reason) when there is no such device.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

// The stream a CUDA backend queues its work on (for a communicator to order against).
// Throws for any other backend.
cudaStream_t cuda_stream(Backend& backend);
int cuda_device(Backend& backend);

}  // namespace ptdp
