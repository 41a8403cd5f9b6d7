#include "core/backend/cuda/cuda_check.h"

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp::cuda {

void throw_cuda_error(const char* call, cudaError_t e, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so that the next check does not report it again
  throw RuntimeError(fmt::format("{} failed: {} ({}) at {}:{}", call, cudaGetErrorString(e), cudaGetErrorName(e),
                                 file, line));
}

void throw_cublas_error(const char* call, cublasStatus_t s, const char* file, int line) {
  throw RuntimeError(fmt::format("{} failed: {} (cublas status {}) at {}:{}", call, cublasGetStatusString(s),
                                 static_cast<int>(s), file, line));
}

}  // namespace ptdp::cuda
