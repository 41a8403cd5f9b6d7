// The GEMM arithmetic behind cublasLtMatmul and cublasGemm*Ex, with no checks and no streams:
// column-major D = alpha op(A) op(B) + beta C (+ bias per row of D), per batch, computed in f32
// over OpenBLAS (16-bit operands widened, one rounding into D's type at the end), then the GELU
// epilogues of cuBLASLt (GemmProblem::act).
#pragma once
#include <library_types.h>

#include <cstdint>

namespace vgpu::blas {

// A matrix as stored: rows x cols column-major with leading dimension ld (elements), batch i at
// ptr + i * stride elements.
struct Matrix {
  const void* ptr = nullptr;
  cudaDataType type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
};

// The GELU epilogues (cublasLt.h, cublasLtEpilogue_t), on t = alpha op(A) op(B) + beta C (+ bias)
// in f32, GELU being the tanh approximation 0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))):
//   Gelu   D = GELU(t); with aux (GELU_AUX, GELU_AUX_BIAS) aux = t, the GELU input, for training
//   DGelu  D = t GELU'(aux), aux holding the forward's GELU input (DGELU); with bgrad
//          (DGELU_BGRAD) the bias vector is an output: bias[r] = the sum of row r of D (in f32,
//          before D's rounding), the bias gradient
enum class Activation { None, Gelu, DGelu };

// op(A) is m x k, op(B) is k x n, C and D are m x n. C is not read when beta == 0 (as in BLAS);
// C and D may be the same memory with the same layout. bias (m values of bias_type, batch i at
// bias + i * bias_stride elements) is added to every column of D when not null (written instead
// with bgrad). aux: m x n of aux_type with leading dimension aux_ld, batch i at aux_stride.
struct GemmProblem {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  Matrix a, b, c, d;
  const void* bias = nullptr;
  cudaDataType bias_type = CUDA_R_32F;
  int64_t bias_stride = 0;
  Activation act = Activation::None;
  bool bgrad = false;
  const void* aux = nullptr;
  cudaDataType aux_type = CUDA_R_32F;
  int64_t aux_ld = 0, aux_stride = 0;
};

// Runs the products; safe to call from several threads at once (scratch is per thread).
void compute_gemm(const GemmProblem& p);

// The calling thread's OpenMP setting while its last product ran (0: none ran on it).
int openmp_threads_of_last_product_for_testing();

// While it lives, OpenBLAS runs the calling thread's products on one thread (gemm_core.cpp).
class OneBlasThread {
 public:
  OneBlasThread();
  ~OneBlasThread();
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace vgpu::blas
