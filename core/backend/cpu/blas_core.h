// Which of OpenBLAS's kernel sets runs, and the one to ask for where OpenBLAS does not know the
// CPU. OpenBLAS built for several CPUs (DYNAMIC_ARCH, as Debian's is) picks its kernels by the
// CPU's model when it loads; a model newer than the library gets its SSE3 fallback, "Prescott":
// Debian 12's 0.3.21 on a 5th-generation Xeon (family 6, model 207) ran sgemm at 29 GFLOP/s a
// core against 145-149 with its SkylakeX kernels. OPENBLAS_CORETYPE, read when the library
// loads, chooses instead (OpenBLAS's USAGE.md).
#pragma once
#include <string>

namespace ptdp::cpu {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512 = false;  // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
};
CpuFeatures cpu_features();  // this CPU's

// The kernel set OpenBLAS runs ("SkylakeX", "Haswell", "Zen", "Prescott", ...).
std::string blas_core();

// The kernel set to ask for instead of `core` on a CPU with `f`, or "" to keep it. Only OpenBLAS's
// fallback for CPUs it does not know (Prescott) is replaced: by SkylakeX with AVX-512, by Haswell
// with AVX2 and FMA.
std::string better_blas_core(const std::string& core, const CpuFeatures& f);

// At the start of main, before any thread: where OpenBLAS fell back and OPENBLAS_CORETYPE is
// unset, sets it (and PTDP_BLAS_FALLBACK to the fallback's name) and executes this program again,
// with the same arguments, in the same process. Returns when there is nothing to do, under
// valgrind (whose tool is /proc/self/exe), or when the exec failed (a warning says so).
void prefer_known_blas_core(char** argv);

// "OpenBLAS 0.3.21, SkylakeX kernels", and when ptdp chose them, why.
std::string blas_description();

}  // namespace ptdp::cpu
