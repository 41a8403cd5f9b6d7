#include "core/backend/cpu/blas.h"

#include <cblas.h>

namespace ptdp::cpu {

namespace {
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
}  // namespace

template <>
void gemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int blas_parallel_mode() { return openblas_get_parallel(); }
int blas_num_threads() { return openblas_get_num_threads(); }

}  // namespace ptdp::cpu
