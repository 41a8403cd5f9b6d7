// Matrix products on one stream through cuBLASLt: f32 compute and scale (CUBLAS_COMPUTE_32F,
// no TF32), A and B in one dtype, C = D in that dtype or f32, optional strided batches and a
// bias epilogue, or the GELU epilogues of an MLP (run_gelu, run_dgelu). Descriptors and the
// heuristic's algorithm are cached per shape, dtypes, epilogue and pointer alignments. Column-major, in cuBLAS's terms: D = alpha op(A) op(B) + beta C, with
// C and D the same buffer. When cuBLASLt offers no algorithm the call falls back to
// cublasGemmStridedBatchedEx (bias by a broadcast kernel before the product).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>

#include "core/tensor/dtype.h"

namespace ptdp::cuda {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // op(A) is m x k, op(B) k x n, C m x n
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
  DType ab = DType::F32, c = DType::F32;
};

class GemmRunner {
 public:
  GemmRunner(int device, cudaStream_t stream);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // `bias` (m values of type c, for a single product with beta = 0) is added to every column.
  void run(const GemmShape& g, float alpha, const void* a, const void* b, float beta, void* c,
           const void* bias = nullptr);

  // A single product with beta 0 and a GELU epilogue (cuBLASLt's tanh approximation), the GELU
  // input matrix `aux` laid out as C: forward (GELU_AUX_BIAS) c = gelu(op(A) op(B) + bias) with
  // aux = the GELU input; backward (DGELU) c = op(A) op(B) gelu'(aux). False, with nothing
  // queued, where cuBLASLt has no such product (aux's leading dimension not a multiple of 8, an
  // operand less than 16-byte aligned, no algorithm): the caller runs the unfused ops then;
  // has_gelu says beforehand (backward: DGELU, bias null).
  bool has_gelu(const GemmShape& g, const void* a, const void* b, const void* c, const void* bias, const void* aux,
                bool backward);
  bool run_gelu(const GemmShape& g, const void* a, const void* b, void* c, const void* bias, void* aux);
  bool run_dgelu(const GemmShape& g, const void* a, const void* b, void* c, const void* aux);

  size_t cached_plans() const { return plans_.size(); }
  size_t fallbacks() const { return fallbacks_; }  // products that had no cuBLASLt algorithm
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

 private:
  struct Plan;
  // The epilogue of a plan and its vectors (bias, the GELU input matrix).
  struct Epilogue {
    cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    const void* aux = nullptr;
  };
  using Key = std::array<int64_t, 20>;
  Plan& plan(const GemmShape& g, const Epilogue& e, const void* a, const void* b, const void* c);
  bool run_epilogue(const GemmShape& g, const Epilogue& e, float alpha, const void* a, const void* b, void* c);
  void run_fallback(const GemmShape& g, float alpha, const void* a, const void* b, float beta, void* c);

  int device_;
  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;  // created on first fallback
  void* workspace_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  size_t fallbacks_ = 0;
};

}  // namespace ptdp::cuda
