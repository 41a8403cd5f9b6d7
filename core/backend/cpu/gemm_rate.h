// The sgemm rate over a list of GEMM shapes (a model's: core/accounting/model_gemms.h): the
// reference a CPU training step is measured against (bench_cpu, `ptdp train --gemm-rate`). What
// runs outside these GEMMs is the step's overhead.
#pragma once
#include <cstdint>
#include <vector>

namespace ptdp::cpu {

struct GemmShape {
  bool ta, tb;
  int64_t m, n, k;
};

// f32 operands for a list of GEMMs; run() calls OpenBLAS sgemm on each (beta 0) with the calling
// thread's thread count.
class SgemmSet {
 public:
  explicit SgemmSet(std::vector<GemmShape> gemms);
  void run();
  double flops() const { return flops_; }  // 2 m n k summed
  const float* last_output() const { return out_.back().data(); }

 private:
  std::vector<GemmShape> gemms_;
  std::vector<std::vector<float>> a_, b_, out_;
  double flops_ = 0;
};

// The rate of SgemmSet(gemms).run() in GFLOP/s: repeated until `min_seconds` have passed in all,
// the best of three rounds.
double sgemm_gflops(const std::vector<GemmShape>& gemms, double min_seconds);

}  // namespace ptdp::cpu
