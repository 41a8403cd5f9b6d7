#include "core/backend/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

namespace ptdp {

void set_cpu_threads(int n) {
  omp_set_num_threads(n);        // this thread's OpenMP regions (a per-thread setting)
  openblas_set_num_threads(n);  // OpenBLAS's own (a process-wide setting)
}

}  // namespace ptdp
