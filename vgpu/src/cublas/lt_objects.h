// The cuBLASLt objects behind the opaque handles of cublasLt.h (context, matmul descriptor,
// matrix layout, preference) with their documented defaults, and the algorithm record that
// cublasLtMatmulAlgoGetHeuristic writes into cublasLtMatmulAlgo_t.
#pragma once
#include <cublasLt.h>

#include <cstdint>

#include "cublas/handles.h"

struct cublasLtContext : vgpu::blas::Object {
  int device = 0;
};

// Defaults from cublasLtMatmulDescAttributes_t: scale type = compute type's, host pointer mode,
// no transposes, full fill mode, EPILOGUE_DEFAULT, no bias, bias data type -1 (D's type), no
// epilogue auxiliary buffer (leading dimension and batch stride 0, data type -1: D's type).
struct cublasLtMatmulDescOpaque_t : vgpu::blas::Object {
  int32_t compute = CUBLAS_COMPUTE_32F;
  int32_t scale = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
  int32_t fill = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_stride = 0;
  int32_t bias_type = -1;
  const void* aux = nullptr;
  int64_t aux_ld = 0, aux_stride = 0;
  int32_t aux_type = -1;
  int32_t sm_count = 0;
};

// Defaults from cublasLtMatrixLayoutAttribute_t: column-major, batch count 1, stride 0.
struct cublasLtMatrixLayoutOpaque_t : vgpu::blas::Object {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
  int64_t plane_offset = 0;
};

// Defaults from cublasLtMatmulPreferenceAttributes_t: best-fit search, no workspace, and 256-byte
// minimum alignments for A, B, C and D.
struct cublasLtMatmulPreferenceOpaque_t : vgpu::blas::Object {
  uint32_t search = CUBLASLT_SEARCH_BEST_FIT;
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = 0xffffffffu;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
  float max_waves = 0.0f;
  uint64_t impl_mask = ~uint64_t{0};
};

namespace vgpu::blas {

// What the heuristic promised the algorithm: the alignments it may assume. Stored in
// cublasLtMatmulAlgo_t::data (the struct is copied by value, as with the real library).
struct AlgoRecord {
  static constexpr uint64_t kMagic = 0x56475055414c474fULL;  // "VGPUALGO"
  uint32_t align[4] = {256, 256, 256, 256};                  // A, B, C, D
  uint32_t bias_align = 256;
  uint32_t aux_align = 256;
};
cublasLtMatmulAlgo_t encode_algo(const AlgoRecord& r);
bool decode_algo(const cublasLtMatmulAlgo_t& a, AlgoRecord* r);  // false: not from the heuristic

}  // namespace vgpu::blas
