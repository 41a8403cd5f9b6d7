#include "core/backend/cpu/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace ptdp::cpu {

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string better_blas_core(const std::string& core, const CpuFeatures& f) {
  if (strcasecmp(core.c_str(), "prescott") != 0) return "";
  if (f.avx512) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  return "";
}

void prefer_known_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string core = blas_core();
  const std::string want = better_blas_core(core, cpu_features());
  if (want.empty()) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload && std::strstr(preload, "vgpreload")) return;  // valgrind: /proc/self/exe is its tool
  setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
  setenv("PTDP_BLAS_FALLBACK", core.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "ptdp: warning: OpenBLAS runs its %s kernels on this CPU, which it does not know, and ptdp could not "
               "start again with OPENBLAS_CORETYPE=%s (exec /proc/self/exe: %s): GEMMs run at a fraction of this "
               "CPU's rate; set OPENBLAS_CORETYPE=%s\n",
               core.c_str(), want.c_str(), std::strerror(errno), want.c_str());
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("PTDP_BLAS_FALLBACK");
}

std::string blas_description() {
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": its first two words
  std::string config = openblas_get_config() ? openblas_get_config() : "OpenBLAS";
  if (size_t sp = config.find(' '); sp != std::string::npos)
    if (size_t sp2 = config.find(' ', sp + 1); sp2 != std::string::npos) config.resize(sp2);
  std::string d = config + ", " + blas_core() + " kernels";
  const char* fallback = std::getenv("PTDP_BLAS_FALLBACK");
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (fallback && chosen && *chosen)
    d += std::string(" (OPENBLAS_CORETYPE=") + chosen + ", set by ptdp: OpenBLAS does not know this CPU and chose " +
         fallback + ")";
  else if (chosen && *chosen)
    d += std::string(" (OPENBLAS_CORETYPE=") + chosen + ")";
  return d;
}

}  // namespace ptdp::cpu
