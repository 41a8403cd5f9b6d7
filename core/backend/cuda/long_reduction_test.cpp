// Reductions over thousands of positive terms stored in bf16 and f16: every CUDA op must
// accumulate in f32 (core/backend/backend.h) whatever the storage. A 16-bit running sum stops
// growing once its spacing exceeds a term (bf16: at 256 terms of about 1; f16: at 2048), which the
// op tests' few hundred signed terms (cuda_backend_test.cpp, within 1e-2 in 16 bits) never reach.
// Each result is compared with the CPU backend's f32 sums of the same rounded inputs within 1e-4:
// a column reduction whose per-thread partial sums were rounded to bf16 after every term missed by
// 1e-3 (its chunks keep the partial sums short), one summing in 16 bits throughout by tens of
// percent. Without a GPU these tests skip with the reason.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <cmath>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/common/rng.h"

namespace ptdp {
namespace {

constexpr DType F32 = DType::F32;
constexpr int64_t kTerms = 4096;  // 16 x bf16's stall point, 2 x f16's

class LongReductions : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string reason;
    if (cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
    gpu = make_cuda_backend(0);
    dt = GetParam();
  }

  // Host f32 values in [lo, hi), rounded to dt: what both backends read.
  Tensor input(Shape shape, uint64_t stream, double lo = 0.5, double hi = 1.0) {
    Tensor f = Tensor::empty(shape, F32), stored = Tensor::empty(shape, dt), out = Tensor::empty(std::move(shape), F32);
    for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = float(lo + (hi - lo) * uniform01(77, stream, uint64_t(i)));
    stored.copy_from(f);
    out.copy_from(stored);
    return out;
  }
  Tensor up(const Tensor& host, DType d) {
    Tensor t = gpu->empty(host.shape(), d);
    gpu->copy(t, host);
    return t;
  }
  Tensor zeros(Shape shape, DType d) {
    Tensor t = gpu->empty(std::move(shape), d);
    gpu->fill(t, 0.0);
    return t;
  }
  Tensor host_zeros(Shape shape) { return Tensor::zeros(std::move(shape), F32); }
  // Largest relative difference, element by element (every reference here is far from zero).
  void expect_close(const Tensor& dev, const Tensor& ref, const char* what, double tolerance = 1e-4) {
    Tensor got = Tensor::empty(dev.shape(), F32);
    gpu->copy(got, dev);
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double r = ref.data<float>()[i], d = std::abs(got.data<float>()[i] - r) / std::abs(r);
      if (!(d <= worst)) worst = d, at = i;
    }
    EXPECT_LT(worst, tolerance) << what << " (" << dtype_name(dt) << "): element " << at << " is "
                                << got.data<float>()[at] << ", the f32 sum " << ref.data<float>()[at];
  }

  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> gpu;
  DType dt = F32;
};

// dw = dy^T x and db = column sums of dy over 4096 rows, into f32 gradients.
TEST_P(LongReductions, LinearWeightAndBiasGradients) {
  Tensor x = input({kTerms, 4}, 1), dy = input({kTerms, 3}, 2), w = input({3, 4}, 3);
  Tensor rdw = host_zeros({3, 4}), rdb = host_zeros({3});
  cpu->linear_backward(nullptr, false, rdw, &rdb, dy, x, w);
  Tensor dw = zeros({3, 4}, F32), db = zeros({3}, F32);
  gpu->linear_backward(nullptr, false, dw, &db, up(dy, dt), up(x, dt), up(w, dt));
  expect_close(dw, rdw, "linear dw");
  expect_close(db, rdb, "linear db");
}

// LayerNorm's bias gradient and RMSNorm's gain gradient (positive x, g and dy: every term
// dy * x * rstd is positive) sum over 4096 rows. LayerNorm's gain gradient has terms of both signs
// (x centred) and no stall point.
TEST_P(LongReductions, NormGradientsOverManyRows) {
  const int64_t c = 5;
  Tensor x = input({kTerms, c}, 4), g = input({c}, 5), b = input({c}, 6), dy = input({kTerms, c}, 7);
  Tensor ry = host_zeros({kTerms, c}), rm = host_zeros({kTerms}), rr = host_zeros({kTerms});
  cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
  Tensor rdx = host_zeros({kTerms, c}), rdg = host_zeros({c}), rdb = host_zeros({c});
  cpu->layernorm_backward(rdx, rdg, rdb, dy, x, g, rm, rr);
  Tensor dx = zeros({kTerms, c}, dt), dg = zeros({c}, F32), db = zeros({c}, F32);
  gpu->layernorm_backward(dx, dg, db, up(dy, dt), up(x, dt), up(g, dt), up(rm, F32), up(rr, F32));
  expect_close(db, rdb, "layernorm db");

  Tensor rrs = host_zeros({kTerms}), rdx2 = host_zeros({kTerms, c}), rdg2 = host_zeros({c});
  cpu->rmsnorm_forward(ry, rrs, x, g, 1e-5);
  cpu->rmsnorm_backward(rdx2, rdg2, dy, x, g, rrs);
  Tensor dx2 = zeros({kTerms, c}, dt), dg2 = zeros({c}, F32);
  gpu->rmsnorm_backward(dx2, dg2, up(dy, dt), up(x, dt), up(g, dt), up(rrs, F32));
  expect_close(dg2, rdg2, "rmsnorm dg");
}

// Mean and mean square over 8192 columns of one row.
TEST_P(LongReductions, NormStatisticsOverAWideRow) {
  const int64_t c = 2 * kTerms;
  Tensor x = input({2, c}, 9), g = input({c}, 10), b = input({c}, 11);
  Tensor ry = host_zeros({2, c}), rm = host_zeros({2}), rr = host_zeros({2});
  cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
  Tensor y = zeros({2, c}, dt), m = zeros({2}, F32), r = zeros({2}, F32);
  gpu->layernorm_forward(y, m, r, up(x, dt), up(g, dt), up(b, dt), 1e-5);
  expect_close(m, rm, "layernorm mean");
  // rstd of values in [0.5, 1): a variance of about 1/48, from sums of squares near 0.58 c.
  expect_close(r, rr, "layernorm rstd", 1e-3);
  Tensor rr2 = host_zeros({2}), y2 = zeros({2, c}, dt), r2 = zeros({2}, F32);
  cpu->rmsnorm_forward(ry, rr2, x, g, 1e-5);
  gpu->rmsnorm_forward(y2, r2, up(x, dt), up(g, dt), 1e-5);
  expect_close(r2, rr2, "rmsnorm rstd");
}

// Every row the same token: its embedding gradient row sums 4096 rows of dx.
TEST_P(LongReductions, EmbeddingGradientOfARepeatedToken) {
  const int64_t h = 3, rows = 4;
  Tensor dx = input({kTerms, h}, 12);
  Tensor tok = Tensor::empty({kTerms}, DType::I32);
  for (int64_t i = 0; i < kTerms; ++i) tok.data<int32_t>()[i] = 2;
  Tensor rwte = host_zeros({rows, h});
  cpu->embedding_backward(rwte, nullptr, dx, tok, 0, kTerms);
  Tensor wte = zeros({rows, h}, F32);
  gpu->embedding_backward(wte, nullptr, up(dx, dt), up(tok, DType::I32), 0, kTerms);
  Tensor row = Tensor::empty({h}, F32), rrow = rwte.view(2 * h, {h});
  gpu->copy(row, wte.view(2 * h, {h}));
  expect_close(row, rrow, "embedding dwte of the repeated token");
}

// The softmax denominator of the loss over 8192 vocabulary columns.
TEST_P(LongReductions, CrossEntropySumOfExponentials) {
  const int64_t v = 2 * kTerms;
  Tensor logits = input({2, v}, 13);
  Tensor rmax = host_zeros({2}), rse = host_zeros({2});
  cpu->xent_row_max(rmax, logits, v);
  cpu->xent_sum_exp(rse, logits, rmax, v);
  Tensor se = zeros({2}, F32);
  gpu->xent_sum_exp(se, up(logits, dt), up(rmax, F32), v);
  expect_close(se, rse, "xent sum_exp");
}

std::string name(const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); }

INSTANTIATE_TEST_SUITE_P(Cuda, LongReductions, ::testing::Values(DType::BF16, DType::F16), name);

}  // namespace
}  // namespace ptdp
#endif
