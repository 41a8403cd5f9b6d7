// Only OpenBLAS's fallback for CPUs it does not know is replaced, by the best kernel set the CPU
// can run (the command line's side: CliNames.VersionNamesTheBlasKernels*).
#include "core/backend/cpu/blas_core.h"

#include <gtest/gtest.h>

namespace ptdp::cpu {
namespace {

TEST(BlasCore, OnlyTheFallbackIsReplacedByWhatTheCpuRuns) {
  const CpuFeatures avx512{true, true, true}, avx2{true, true, false}, avx2_no_fma{true, false, false}, sse{};
  EXPECT_EQ(better_blas_core("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("PRESCOTT", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("Prescott", avx2), "Haswell");
  EXPECT_EQ(better_blas_core("Prescott", avx2_no_fma), "");
  EXPECT_EQ(better_blas_core("Prescott", sse), "");
  for (const char* known : {"SkylakeX", "Cooperlake", "Haswell", "Zen", "Sandybridge", "Nehalem", ""})
    EXPECT_EQ(better_blas_core(known, avx512), "") << known;
}

TEST(BlasCore, TheDescriptionNamesTheLibraryAndItsKernels) {
  const std::string d = blas_description();
  EXPECT_EQ(d.rfind("OpenBLAS ", 0), 0u) << d;
  EXPECT_NE(d.find(", " + blas_core() + " kernels"), std::string::npos) << d;
}

}  // namespace
}  // namespace ptdp::cpu
