// Checked CUDA and cuBLAS calls: a failure throws ptdp::RuntimeError naming the call, the
// error, the file and the line. PTDP_CUDA_CHECK_LAUNCH checks the kernel launch just made.
#pragma once
#include <cublas_api.h>
#include <cuda_runtime.h>

namespace ptdp::cuda {

[[noreturn]] void throw_cuda_error(const char* call, cudaError_t e, const char* file, int line);
[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t s, const char* file, int line);

}  // namespace ptdp::cuda

#define PTDP_CUDA_CHECK(call)                                                         \
  do {                                                                                \
    const cudaError_t ptdp_e_ = (call);                                               \
    if (ptdp_e_ != cudaSuccess) ::ptdp::cuda::throw_cuda_error(#call, ptdp_e_, __FILE__, __LINE__); \
  } while (0)

#define PTDP_CUBLAS_CHECK(call)                                                       \
  do {                                                                                \
    const cublasStatus_t ptdp_s_ = (call);                                            \
    if (ptdp_s_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::ptdp::cuda::throw_cublas_error(#call, ptdp_s_, __FILE__, __LINE__);           \
  } while (0)

// After a <<<...>>> launch: `kernel` names it in the error.
#define PTDP_CUDA_CHECK_LAUNCH(kernel)                                                \
  do {                                                                                \
    const cudaError_t ptdp_e_ = cudaGetLastError();                                   \
    if (ptdp_e_ != cudaSuccess)                                                       \
      ::ptdp::cuda::throw_cuda_error("launch of " kernel, ptdp_e_, __FILE__, __LINE__); \
  } while (0)
