#include "core/backend/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

namespace ptdp {

void set_cpu_threads(int n) {
  omp_set_num_threads(n);        // this thread's OpenMP regions (a per-thread setting)
  openblas_set_num_threads(n);  // OpenBLAS's own (a process-wide setting)
}

int cpu_thread_budget() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const std::string first = std::string(env).substr(0, std::string(env).find(','));
    char* end = nullptr;
    const long n = std::strtol(first.c_str(), &end, 10);
    if (!first.empty() && end && *end == '\0' && n > 0 && n <= 4096) return int(n);
  }
  return std::max(1, int(std::thread::hardware_concurrency()));
}

}  // namespace ptdp
