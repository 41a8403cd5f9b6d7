// The norms, the causal softmax and the cross-entropy loss with f16 inputs near the edge of f16's
// range (|x| up to 65504): every intermediate that could overflow in 16 bits (a square, a sum of
// exponentials) must be an f32 one. On the virtual GPU __half arithmetic rounds and overflows as
// the GPU's does (vgpu/include/vgpu/half_ops.h), so a kernel that computes in f16 fails here too:
// CudaF16Edge.ARmsNormThatSquaresInF16IsCaught and ALayerNormWhoseVarianceSquaresInF16IsCaught keep
// such kernels as plants (device code in a test file: built for the virtual GPU only; a CUDA build
// compiles its tests as host C++).
#include <gtest/gtest.h>

#if defined(PTDP_HAVE_CUDA)
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_info.h"
#ifdef PTDP_VGPU  // the plants' kernels: device code, which only the virtual GPU's build compiles from a test
#include "core/backend/cuda/device_types.cuh"
#endif
#include "core/backend/cuda/kernels.h"

namespace ptdp::cuda {
namespace {

template <class T>
struct Dev {  // a device buffer of n T's
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { PTDP_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T))); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& v) { PTDP_CUDA_CHECK(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    PTDP_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

std::vector<__half> to_half(const std::vector<double>& v) {
  std::vector<__half> h;
  for (double x : v) h.push_back(__float2half_rn(float(x)));
  return h;
}
std::vector<double> widen(const std::vector<__half>& h) {
  std::vector<double> v;
  for (__half x : h) v.push_back(__half2float(x));
  return v;
}

// The first element of `got` (rows of c) not within tol (relative to the row's largest reference
// magnitude) of `want`, or that is not finite: "" when there is none.
std::string first_mismatch(const std::vector<double>& got, const std::vector<double>& want, int64_t c, double tol) {
  for (size_t r = 0; r * c < want.size(); ++r) {
    double scale = 0;
    for (int64_t i = 0; i < c; ++i) scale = std::max(scale, std::fabs(want[r * c + i]));
    for (int64_t i = 0; i < c; ++i) {
      const double g = got[r * c + i], w = want[r * c + i];
      if (!std::isfinite(g) || std::fabs(g - w) > tol * std::max(scale, 1e-30))
        return "row " + std::to_string(r) + " element " + std::to_string(i) + ": " + std::to_string(g) +
               " where the f64 reference gives " + std::to_string(w);
    }
  }
  return "";
}

// Rows whose magnitudes reach the edge of f16: x*x overflows f16 (65504) for any |x| >= 256.
std::vector<double> edge_rows(int64_t n, int64_t c) {
  std::vector<double> x(n * c);
  const double tops[] = {300.0, 4096.0, 65504.0, 1.0};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < c; ++i) x[r * c + i] = tops[r % 4] * (i % 2 ? -1.0 : 1.0) * (0.5 + 0.5 * double(i) / c);
  return x;
}

std::vector<double> rmsnorm_reference(const std::vector<double>& x, int64_t c, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * c < x.size(); ++r) {
    double ss = 0;
    for (int64_t i = 0; i < c; ++i) ss += x[r * c + i] * x[r * c + i];
    const double rs = 1.0 / std::sqrt(ss / c + eps);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = x[r * c + i] * rs;
  }
  return y;
}

bool have_gpu() {
  std::string reason;
  return device_count(&reason) > 0;
}

// RMSNorm run with `launch` (the product's, or a plant) on f16 rows at the edge; "" when right.
template <class Launch>
std::string rmsnorm_problem(Launch launch) {
  const int64_t n = 8, c = 64;
  const std::vector<double> x = edge_rows(n, c);
  Dev<__half> dx(n * c), dg(c), dy(n * c);
  Dev<float> rstd(n);
  dx.put(to_half(x));
  dg.put(std::vector<__half>(c, __float2half_rn(1.0f)));
  launch(dy.p, rstd.p, dx.p, dg.p, n, c, 1e-5f);
  PTDP_CUDA_CHECK(cudaDeviceSynchronize());
  return first_mismatch(widen(dy.get()), rmsnorm_reference(widen(to_half(x)), c, 1e-5), c, 4e-3);
}

TEST(CudaF16Edge, RmsNormKeepsRowsNearTheRangesEdge) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  const std::string problem =
      rmsnorm_problem([](__half* y, float* rstd, const __half* x, const __half* g, int64_t n, int64_t c, float eps) {
        rmsnorm_forward(y, rstd, x, g, DType::F16, n, c, eps, nullptr);
      });
  EXPECT_EQ(problem, "");
}

#ifdef PTDP_VGPU
// The plant: the square taken in the input's type, as `v * v` of two __half is under nvcc. Every
// |v| >= 256 makes it inf, the row's rstd 0 and the row zero.
__global__ void rmsnorm_squares_in_t(__half* y, float* rstd, const __half* x, const __half* g, int64_t n, int64_t c,
                                     float eps) {
  const int64_t row = blockIdx.x * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  float ss = 0.0f;
  for (int64_t i = lane; i < c; i += 32) {
    const __half v = x[row * c + i];
    ss += __half2float(v * v);  // planted: a __half product
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / float(c) + eps);
  for (int64_t i = lane; i < c; i += 32)
    y[row * c + i] = __float2half_rn(__half2float(x[row * c + i]) * rs * __half2float(g[i]));
  if (lane == 0) rstd[row] = rs;
}

TEST(CudaF16Edge, ARmsNormThatSquaresInF16IsCaught) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  const std::string problem =
      rmsnorm_problem([](__half* y, float* rstd, const __half* x, const __half* g, int64_t n, int64_t c, float eps) {
        PTDP_LAUNCH(unsigned((n + 7) / 8), 256, 0, nullptr, rmsnorm_squares_in_t)(y, rstd, x, g, n, c, eps);
      });
  // Row 0 (|x| from 150 to 300): the squares overflow f16 and the row is zeroed.
  EXPECT_NE(problem.find("row 0 element 0: 0.000000 where the f64 reference gives"), std::string::npos) << problem;
}
#endif  // PTDP_VGPU

// LayerNorm run with `launch` (the product's, or a plant) on f16 rows at the edge; "" when right.
template <class Launch>
std::string layernorm_problem(Launch launch) {
  const int64_t n = 8, c = 64;
  const std::vector<double> x = widen(to_half(edge_rows(n, c)));
  Dev<__half> dx(n * c), dg(c), db(c), dy(n * c);
  Dev<float> mean(n), rstd(n);
  dx.put(to_half(x));
  dg.put(std::vector<__half>(c, __float2half_rn(1.0f)));
  db.put(std::vector<__half>(c, __float2half_rn(0.0f)));
  launch(dy.p, mean.p, rstd.p, dx.p, dg.p, db.p, n, c, 1e-5f);
  PTDP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < c; ++i) m += x[r * c + i] / c;
    for (int64_t i = 0; i < c; ++i) v += (x[r * c + i] - m) * (x[r * c + i] - m) / c;
    for (int64_t i = 0; i < c; ++i) want[r * c + i] = (x[r * c + i] - m) / std::sqrt(v + 1e-5);
  }
  return first_mismatch(widen(dy.get()), want, c, 4e-3);
}

TEST(CudaF16Edge, LayerNormKeepsRowsNearTheRangesEdge) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  EXPECT_EQ(layernorm_problem([](__half* y, float* mean, float* rstd, const __half* x, const __half* g, const __half* b,
                                 int64_t n, int64_t c, float eps) {
              layernorm_forward(y, mean, rstd, x, g, b, DType::F16, n, c, eps, nullptr);
            }),
            "");
}

#ifdef PTDP_VGPU
// A second plant of the class: the variance's deviations squared in the input's type (the mean in
// f32, as it should be). Any |x - mean| >= 256 makes a square inf, rstd 0 and the row zero.
__global__ void layernorm_variance_in_t(__half* y, float* mean, float* rstd, const __half* x, const __half* g,
                                        const __half* b, int64_t n, int64_t c, float eps) {
  const int64_t row = blockIdx.x * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const __half* xr = x + row * c;
  float s = 0.0f;
  for (int64_t i = lane; i < c; i += 32) s += __half2float(xr[i]);
  const float m = warp_sum(s) / float(c);
  float var = 0.0f;
  for (int64_t i = lane; i < c; i += 32) {
    const __half d = __float2half_rn(__half2float(xr[i]) - m);
    var += __half2float(d * d);  // planted: a __half square
  }
  const float rs = 1.0f / sqrtf(warp_sum(var) / float(c) + eps);
  for (int64_t i = lane; i < c; i += 32)
    y[row * c + i] = __float2half_rn((__half2float(xr[i]) - m) * rs * __half2float(g[i]) + __half2float(b[i]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

TEST(CudaF16Edge, ALayerNormWhoseVarianceSquaresInF16IsCaught) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  const std::string problem = layernorm_problem([](__half* y, float* mean, float* rstd, const __half* x,
                                                   const __half* g, const __half* b, int64_t n, int64_t c, float eps) {
    PTDP_LAUNCH(unsigned((n + 7) / 8), 256, 0, nullptr, layernorm_variance_in_t)(y, mean, rstd, x, g, b, n, c, eps);
  });
  EXPECT_NE(problem.find("row 0 element 0: 0.000000 where the f64 reference gives"), std::string::npos) << problem;
}
#endif  // PTDP_VGPU

TEST(CudaF16Edge, CausalSoftmaxKeepsScoresNearTheRangesEdge) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  const int s = 16;
  const int64_t rows = 2 * s;
  std::vector<double> x(rows * s);
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < s; ++j) x[r * s + j] = (r / s ? -65504.0 : 65504.0) * (j % 3 == 0 ? 1.0 : 0.999);
  x = widen(to_half(x));
  Dev<__half> dp(rows * s);
  dp.put(to_half(x));
  causal_softmax_forward(dp.p, DType::F16, rows, s, nullptr);
  PTDP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int q = int(r % s);
    double mx = -INFINITY, se = 0;
    for (int j = 0; j <= q; ++j) mx = std::max(mx, x[r * s + j]);
    for (int j = 0; j <= q; ++j) se += std::exp(x[r * s + j] - mx);
    for (int j = 0; j <= q; ++j) want[r * s + j] = std::exp(x[r * s + j] - mx) / se;
  }
  EXPECT_EQ(first_mismatch(widen(dp.get()), want, s, 4e-3), "");
}

TEST(CudaF16Edge, CrossEntropyKeepsLogitsNearTheRangesEdge) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here";
  const int64_t n = 4, v = 32;
  std::vector<double> x(n * v);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < v; ++j) x[r * v + j] = (r % 2 ? -1.0 : 1.0) * (65504.0 - 8.0 * double(j)) / (1 + r / 2);
  x = widen(to_half(x));
  Dev<__half> dl(n * v);
  Dev<float> mx(n), se(n), tgt(n), loss(n);
  Dev<int32_t> targets(n);
  dl.put(to_half(x));
  targets.put({0, 3, 5, 31});
  xent_row_max(mx.p, dl.p, DType::F16, n, v, v, nullptr);
  xent_sum_exp(se.p, dl.p, mx.p, DType::F16, n, v, v, nullptr);
  xent_target_logit(tgt.p, dl.p, DType::F16, targets.p, n, v, 0, v, nullptr);
  xent_loss(loss.p, mx.p, se.p, tgt.p, n, nullptr);
  PTDP_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = loss.get();
  const int32_t t[] = {0, 3, 5, 31};
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < v; ++j) m = std::max(m, x[r * v + j]);
    for (int64_t j = 0; j < v; ++j) s += std::exp(x[r * v + j] - m);
    const double want = std::log(s) + m - x[r * v + t[r]];
    EXPECT_TRUE(std::isfinite(got[r])) << "row " << r;
    // log(se) + max - target in f32: near 65504 its last bit is 2^-8, so a few thousandths.
    EXPECT_NEAR(got[r], want, 1e-3 * std::max(1.0, std::fabs(want)) + 1e-7 * std::fabs(m)) << "row " << r;
  }
}

}  // namespace
}  // namespace ptdp::cuda
#endif
