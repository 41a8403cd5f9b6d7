// What the CUDA op tests share: seeded host inputs rounded to the compute dtype, and a fixture
// over the compute dtypes that moves tensors to and from the GPU (skipped where there is none).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/common/rng.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

namespace ptdp::testing {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Host f32 tensor, uniform in [lo, hi), from counter-based draws (seed, stream, element).
inline Tensor uniform_host(Shape shape, uint64_t seed, uint64_t stream, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(lo + (hi - lo) * uniform01(seed, stream, uint64_t(i)));
  return t;
}

// Host f32 values as stored in dt (rounded to nearest even).
inline Tensor rounded(const Tensor& x, DType dt) {
  Tensor t = Tensor::empty(x.shape(), dt), r = Tensor::empty(x.shape(), DType::F32);
  t.copy_from(x);
  r.copy_from(t);
  return r;
}

// How far host f32 values `got` are from `ref`: the norm-wise relative error and the largest
// absolute error over the elements finite in both, and the elements whose non-finite values do not
// agree (`bad`, the first at `first_bad`): finite on one side only, or non-finite on both but
// different, which strict_nonfinite takes as any two unequal values (an infinity of the other
// sign, or a NaN) and otherwise as a NaN against an infinity.
struct Closeness {
  double rel = 0, max_abs = 0;
  int64_t bad = 0, first_bad = -1;
};
inline Closeness closeness(const Tensor& got, const Tensor& ref, bool strict_nonfinite) {
  const float* x = got.data<float>();
  const float* r = ref.data<float>();
  Closeness c;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const bool both_nonfinite = !std::isfinite(r[i]) && !std::isfinite(x[i]);
    const bool disagree = std::isfinite(r[i]) != std::isfinite(x[i]) ||
                          (both_nonfinite && (strict_nonfinite ? r[i] != x[i] : std::isnan(r[i]) != std::isnan(x[i])));
    if (disagree) {
      if (c.first_bad < 0) c.first_bad = i;
      ++c.bad;
      continue;
    }
    if (!std::isfinite(r[i])) continue;
    const double d = double(x[i]) - double(r[i]);
    diff += d * d;
    norm += double(r[i]) * r[i];
    c.max_abs = std::max(c.max_abs, std::abs(d));
  }
  c.rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  return c;
}

// A test over the compute dtypes (the parameter) on GPU 0, with tolerance 1e-5 in f32 and 1e-2 in
// 16 bits; `seed` is the draws' seed of input().
class CudaOpTest : public ::testing::TestWithParam<DType> {
 protected:
  explicit CudaOpTest(uint64_t seed) : seed_(seed) {}
  void SetUp() override {
    PTDP_SKIP_WITHOUT_GPU();
    gpu = make_cuda_backend(0);
    dt = GetParam();
    tol = dt == DType::F32 ? 1e-5 : 1e-2;
  }

  // Random input as the CPU sees it: already rounded to the compute dtype.
  Tensor input(Shape shape, uint64_t stream, double lo = -1, double hi = 1) {
    return rounded(uniform_host(std::move(shape), seed_, stream, lo, hi), dt);
  }
  // A device copy of host values in dtype d.
  Tensor up(const Tensor& host, DType d) {
    Tensor t = gpu->empty(host.shape(), d);
    gpu->copy(t, host);
    return t;
  }
  Tensor up(const Tensor& host) { return up(host, host.dtype() == DType::I32 ? DType::I32 : dt); }
  // A device output of dtype d filled with NaN.
  Tensor poisoned(Shape shape, DType d) {
    Tensor t = gpu->empty(std::move(shape), d);
    gpu->fill(t, kNaN);
    return t;
  }
  Tensor down(const Tensor& dev) {
    Tensor h = Tensor::empty(dev.shape(), DType::F32);
    gpu->copy(h, dev);
    return h;
  }

  std::unique_ptr<Backend> gpu;
  DType dt = DType::F32;
  double tol = 1e-5;

 private:
  uint64_t seed_;
};

}  // namespace ptdp::testing
