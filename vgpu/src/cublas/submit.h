// Queues a validated GEMM on a stream, shared by cublasLtMatmul and cublasGemm*Ex: checks that
// every operand's full extent lies in one device allocation, hands the race checker the exact
// read and write ranges, and on the stream's worker checks that the inputs were initialised,
// computes, and marks D initialised.
#pragma once
#include <cublas_api.h>

#include <string>

#include "cublas/gemm_core.h"

namespace vgpu::blas {

struct GemmCall {
  const char* api = "";  // "cublasLtMatmul", "cublasGemmEx", ...
  cudaStream_t stream = nullptr;
  GemmProblem p;
  const void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Elements spanned by batch x (rows x cols, ld, stride): (batch-1) stride + (cols-1) ld + rows,
// 0 for an empty matrix.
int64_t extent_elements(const Matrix& m, int64_t batch);

// Range-checks the operands and the workspace (each failure is reported) and returns
// CUBLAS_STATUS_INVALID_VALUE if any failed; else queues the work and returns SUCCESS.
cublasStatus_t submit_gemm(const GemmCall& call);

// "0x7f...08, aligned to 8 bytes": an address and the largest power of two (up to 256) dividing it.
std::string describe_alignment(const void* p);
uint32_t alignment_of(const void* p);

}  // namespace vgpu::blas
