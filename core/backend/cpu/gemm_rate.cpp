#include "core/backend/cpu/gemm_rate.h"

#include <algorithm>
#include <chrono>

#include "core/backend/cpu/blas.h"

namespace ptdp::cpu {

SgemmSet::SgemmSet(std::vector<GemmShape> gemms) : gemms_(std::move(gemms)) {
  for (const auto& g : gemms_) {
    a_.emplace_back(g.m * g.k, 0.01f);
    b_.emplace_back(g.k * g.n, 0.02f);
    out_.emplace_back(g.m * g.n, 0.0f);
    flops_ += 2.0 * g.m * g.n * g.k;
  }
}

void SgemmSet::run() {
  for (size_t i = 0; i < gemms_.size(); ++i) {
    const GemmShape& g = gemms_[i];
    gemm<float>(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a_[i].data(), g.ta ? g.m : g.k, b_[i].data(), g.tb ? g.k : g.n, 0.0f,
                out_[i].data(), g.n);
  }
}

double sgemm_gflops(const std::vector<GemmShape>& gemms, double min_seconds) {
  SgemmSet set(gemms);
  set.run();  // first touch of every buffer
  using clock = std::chrono::steady_clock;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = clock::now();
    int n = 0;
    double s = 0;
    do {
      set.run();
      ++n;
      s = std::chrono::duration<double>(clock::now() - t0).count();
    } while (s < min_seconds / 3);
    best = std::max(best, set.flops() * n / s / 1e9);
  }
  return best;
}

}  // namespace ptdp::cpu
