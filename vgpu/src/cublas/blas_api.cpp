// The classic cuBLAS subset: cublasCreate/Destroy, SetStream/SetWorkspace/SetMathMode (and their
// getters), and cublasGemmEx / cublasGemmStridedBatchedEx with the documented argument checks,
// queued on the handle's stream through the same GEMM path as cublasLtMatmul.
#include <cublas_v2.h>
#include <vgpu/runtime.h>

#include <algorithm>
#include <new>

#include "cublas/handles.h"
#include "cublas/submit.h"

struct cublasContext : vgpu::blas::Object {
  int device = 0;
  cudaStream_t stream = nullptr;  // "If the cuBLAS library stream is not set, all kernels use the default NULL stream"
  void* workspace = nullptr;      // null: the library's default workspace pool
  size_t workspace_bytes = 0;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {

using vgpu::blas::Kind;

// A null handle is CUBLAS_STATUS_NOT_INITIALIZED ("the library was not initialized"); a destroyed
// or foreign one is reported too.
cublasStatus_t check_handle(const char* api, cublasHandle_t h) {
  return vgpu::blas::check_objects(api, {{h, Kind::BlasHandle, "handle", CUBLAS_STATUS_NOT_INITIALIZED}});
}

bool is_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

bool is_algo(cublasGemmAlgo_t a) {
  const int v = int(a);
  return v == -1 || (v >= 0 && v <= 23) || (v >= 99 && v <= 115);
}

bool is_input_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// The shared body of cublasGemmEx (batchCount 1) and cublasGemmStridedBatchedEx.
cublasStatus_t gemm_ex(const char* api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                       int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                       long long strideA, const void* B, cudaDataType Btype, int ldb, long long strideB,
                       const void* beta, void* C, cudaDataType Ctype, int ldc, long long strideC, int batchCount,
                       cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const cublasStatus_t hs = check_handle(api, handle);
  if (hs != CUBLAS_STATUS_SUCCESS) return hs;
  // CUBLAS_STATUS_INVALID_VALUE: "m < 0 or n < 0 or k < 0", transa/transb not an operation,
  // "lda < max(1, m) if transa == CUBLAS_OP_N and lda < max(1, k) otherwise", likewise ldb
  // (k, n), "ldc < max(1, m)", batchCount < 0, alpha or beta null.
  if (m < 0 || n < 0 || k < 0 || batchCount < 0 || !is_op(transa) || !is_op(transb) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const int a_rows = ta ? k : m, b_rows = tb ? n : k;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  // CUBLAS_STATUS_NOT_SUPPORTED: "the combination of the parameters Atype, Btype and Ctype or the
  // algorithm, algo is not supported". With CUBLAS_COMPUTE_32F: A and B of one type in
  // {32F, 16F, 16BF}, C of A's type or 32F. (The vgpu subset: f32 compute, host alpha/beta.)
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_PEDANTIC)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // Negative batch strides are outside the vgpu subset.
  if (batchCount > 1 && (strideA < 0 || strideB < 0 || strideC < 0)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (Atype != Btype || !is_input_type(Atype) || (Ctype != Atype && Ctype != CUDA_R_32F) || !is_algo(algo) ||
      handle->pointer_mode != CUBLAS_POINTER_MODE_HOST)
    return CUBLAS_STATUS_NOT_SUPPORTED;

  vgpu::blas::GemmCall call;
  call.api = api;
  call.stream = handle->stream;
  call.workspace = handle->workspace;
  call.workspace_bytes = handle->workspace_bytes;
  vgpu::blas::GemmProblem& p = call.p;
  p.trans_a = ta;
  p.trans_b = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batchCount;
  p.alpha = *static_cast<const float*>(alpha);
  p.beta = *static_cast<const float*>(beta);
  p.a = {A, Atype, a_rows, ta ? m : k, lda, strideA};
  p.b = {B, Btype, b_rows, tb ? k : n, ldb, strideB};
  p.c = {C, Ctype, m, n, ldc, strideC};
  p.d = p.c;  // C is both input and output
  return vgpu::blas::submit_gemm(call);
}

}  // namespace

extern "C" {

// cublasCreate: CUBLAS_STATUS_NOT_INITIALIZED "the CUDA Runtime initialization failed" (here: no
// virtual device), CUBLAS_STATUS_INVALID_VALUE for a null handle pointer. The handle is tied to
// the current device.
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  if (vgpu::device_count() == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new (std::nothrow) cublasContext;
  if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
  h->device = vgpu::current_device();
  vgpu::blas::register_object(h, Kind::BlasHandle, h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

// cublasDestroy "will implicitly call cudaDeviceSynchronize()" (cuBLAS context): the handle's
// device is synchronised before the handle goes.
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  const cublasStatus_t s = check_handle("cublasDestroy", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  int current = 0;
  cudaGetDevice(&current);
  if (current != handle->device) cudaSetDevice(handle->device);
  cudaDeviceSynchronize();
  if (current != handle->device) cudaSetDevice(current);
  return vgpu::blas::retire_object(handle, Kind::BlasHandle, "cublasDestroy", CUBLAS_STATUS_NOT_INITIALIZED,
                                   CUBLAS_STATUS_NOT_INITIALIZED);
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  const cublasStatus_t s = check_handle("cublasGetVersion", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!version) return CUBLAS_STATUS_INVALID_VALUE;
  *version = 130000;
  return CUBLAS_STATUS_SUCCESS;
}

// cublasSetStream "unconditionally resets the cuBLAS library workspace back to the default
// workspace pool".
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  const cublasStatus_t s = check_handle("cublasSetStream", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  handle->stream = streamId;
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  const cublasStatus_t s = check_handle("cublasGetStream", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!streamId) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// cublasSetWorkspace: the buffer is a user-owned device buffer; "the workspace pointer has to be
// aligned to at least 256 bytes, otherwise CUBLAS_STATUS_INVALID_VALUE". The vgpu also checks
// that the buffer lies in one device allocation (here and at every product using it).
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes) {
  const cublasStatus_t s = check_handle("cublasSetWorkspace", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (workspace && reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace && workspaceSizeInBytes > 0 &&
      !vgpu::check_range(workspace, workspaceSizeInBytes, "cublasSetWorkspace workspace"))
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = workspace ? workspaceSizeInBytes : 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  const cublasStatus_t s = check_handle("cublasGetPointerMode", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  const cublasStatus_t s = check_handle("cublasSetPointerMode", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;  // device mode: products then return NOT_SUPPORTED (not in the subset)
  return CUBLAS_STATUS_SUCCESS;
}

// cublasSetMathMode: a mode plus optionally CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.
// Every product here is computed in f32 whatever the mode.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  const cublasStatus_t s = check_handle("cublasSetMathMode", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const int base = int(mode) & ~int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
      base != CUBLAS_TF32_TENSOR_OP_MATH && base != CUBLAS_FP32_EMULATED_BF16X9_MATH &&
      base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  const cublasStatus_t s = check_handle("cublasGetMathMode", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return gemm_ex("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
                 Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
  return gemm_ex("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
                 ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

}  // extern "C"
