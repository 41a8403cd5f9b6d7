// Row-major GEMM on OpenBLAS for float and double: C = alpha * op(A) op(B) + beta * C.
#pragma once
#include <cstdint>

namespace ptdp::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// 0 sequential, 1 pthreads, 2 OpenMP (OpenBLAS's own code).
int blas_parallel_mode();
// Threads OpenBLAS uses for one call.
int blas_num_threads();

}  // namespace ptdp::cpu
