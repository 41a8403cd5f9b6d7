// Linear layers on OpenBLAS GEMMs; bias sums as OpenMP loops.
#include <omp.h>

#include <cstring>

#include "core/backend/cpu/blas.h"
#include "core/backend/cpu/kernels.h"

namespace ptdp::cpu {

template <class T>
void linear_forward(T* y, const T* x, const T* w, const T* b, int64_t n, int64_t in, int64_t out) {
  T beta = 0;
  if (b) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) std::memcpy(y + r * out, b, out * sizeof(T));
    beta = 1;
  }
  gemm<T>(false, true, n, out, in, T(1), x, in, w, in, beta, y, out);
}

template <class T>
void linear_backward(T* dx, bool acc_dx, T* dw, T* db, const T* dy, const T* x, const T* w,
                     int64_t n, int64_t in, int64_t out) {
  if (dx) gemm<T>(false, false, n, in, out, T(1), dy, out, w, in, acc_dx ? T(1) : T(0), dx, in);
  gemm<T>(true, false, out, in, n, T(1), dy, out, x, in, T(1), dw, in);
  if (db) {
    // Column sums: each thread owns a contiguous block of columns and walks all rows.
#pragma omp parallel
    {
      int nt = 1, id = 0;
#ifdef _OPENMP
      nt = omp_get_num_threads();
      id = omp_get_thread_num();
#endif
      int64_t chunk = (out + nt - 1) / nt, c0 = id * chunk, c1 = c0 + chunk < out ? c0 + chunk : out;
      for (int64_t r = 0; r < n; ++r) {
        const T* row = dy + r * out;
        for (int64_t c = c0; c < c1; ++c) db[c] += row[c];
      }
    }
  }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t);
template void linear_backward<float>(float*, bool, float*, float*, const float*, const float*, const float*, int64_t,
                                     int64_t, int64_t);
template void linear_backward<double>(double*, bool, double*, double*, const double*, const double*, const double*,
                                      int64_t, int64_t, int64_t);

}  // namespace ptdp::cpu
