// The GEMM arithmetic against a naive triple loop: transposes with ld > rows, strided batches,
// bias, f32/bf16/f16 operands into f32 or same-type results, beta 0 and 1 in place, k = 0, and
// products from several threads at once. Values are multiples of 1/4, so results are exact.
#include "cublas/gemm_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "cublas/gemm_test_util.h"

namespace vgpu::blas {
namespace {

using testing::HostMatrix;
using testing::reference_gemm;

struct Case {
  bool ta = false, tb = false;
  int64_t m = 5, n = 4, k = 3, batch = 1;
  cudaDataType ab = CUDA_R_32F, cd = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, c_is_d = true;
};

// Runs one case with ld = rows + 2 everywhere and padded batch strides, and checks D element for
// element (exactly) and that D's padding is untouched.
void run_case(const Case& cs, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  const int64_t ar = cs.ta ? cs.k : cs.m, ac = cs.ta ? cs.m : cs.k;
  const int64_t br = cs.tb ? cs.n : cs.k, bc = cs.tb ? cs.k : cs.n;
  HostMatrix a(cs.ab, ar, ac, ar + 2, cs.batch), b(cs.ab, br, bc, br + 2, cs.batch);
  HostMatrix d(cs.cd, cs.m, cs.n, cs.m + 2, cs.batch), c(cs.cd, cs.m, cs.n, cs.m + 1, cs.batch);
  a.randomize(rng);
  b.randomize(rng);
  c.randomize(rng);
  d.randomize(rng);
  HostMatrix bias(cs.cd, cs.m, 1, cs.m, cs.batch, cs.m);
  bias.randomize(rng);

  GemmProblem p;
  p.trans_a = cs.ta;
  p.trans_b = cs.tb;
  p.m = cs.m;
  p.n = cs.n;
  p.k = cs.k;
  p.batch = cs.batch;
  p.alpha = cs.alpha;
  p.beta = cs.beta;
  p.a = a.view();
  p.b = b.view();
  p.d = d.view();
  p.c = cs.c_is_d ? d.view() : c.view();
  if (cs.bias) {
    p.bias = bias.data();
    p.bias_type = cs.cd;
    p.bias_stride = cs.m;
  }
  const HostMatrix expected = reference_gemm(p, a, b, cs.c_is_d ? d : c, d, p.bias);
  compute_gemm(p);
  ASSERT_EQ(d.bytes.size(), expected.bytes.size());
  for (int64_t i = 0; i < cs.batch; ++i)
    for (int64_t col = 0; col < cs.n; ++col)
      for (int64_t row = 0; row < cs.m; ++row)
        ASSERT_EQ(d.get(i, row, col), expected.get(i, row, col))
            << "batch " << i << " row " << row << " col " << col << " ta " << cs.ta << " tb " << cs.tb;
  // Nothing outside the m x n part of each batch was written (expected keeps the old padding).
  EXPECT_EQ(d.bytes, expected.bytes);
}

TEST(GemmCore, EveryTransposeCombinationWithLeadingDimensionsAboveRows) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case cs;
      cs.ta = ta;
      cs.tb = tb;
      cs.m = 7;
      cs.n = 5;
      cs.k = 6;
      cs.alpha = 0.5f;
      run_case(cs, 11 + ta * 2 + tb);
    }
}

TEST(GemmCore, StridedBatchesAreIndependentProducts) {
  for (bool ta : {false, true}) {
    Case cs;
    cs.ta = ta;
    cs.tb = !ta;
    cs.batch = 3;
    cs.m = 4;
    cs.n = 6;
    cs.k = 5;
    run_case(cs, 21 + ta);
  }
}

TEST(GemmCore, BiasIsAddedToEveryColumnPerBatch) {
  Case cs;
  cs.bias = true;
  cs.batch = 2;
  run_case(cs, 31);
  cs.ab = cs.cd = CUDA_R_16BF;
  run_case(cs, 32);
}

TEST(GemmCore, SixteenBitInputsIntoF32AndSameTypeOutputs) {
  for (cudaDataType ab : {CUDA_R_16BF, CUDA_R_16F})
    for (bool same : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        Case cs;
        cs.ab = ab;
        cs.cd = same ? ab : CUDA_R_32F;
        cs.beta = beta;
        cs.ta = true;
        cs.m = 9;
        cs.n = 3;
        cs.k = 17;
        cs.bias = same;
        run_case(cs, 41 + same * 2 + (beta != 0));
      }
}

TEST(GemmCore, BetaOneAccumulatesInPlaceAndFromASeparateC) {
  for (cudaDataType cd : {CUDA_R_32F, CUDA_R_16BF})
    for (bool c_is_d : {true, false}) {
      Case cs;
      cs.cd = cd;
      cs.ab = cd;
      cs.beta = 1.0f;
      cs.c_is_d = c_is_d;
      cs.batch = 2;
      run_case(cs, 51 + c_is_d);
    }
}

TEST(GemmCore, BetaZeroIgnoresNaNsAlreadyInD) {
  for (cudaDataType cd : {CUDA_R_32F, CUDA_R_16F}) {
    HostMatrix a(CUDA_R_32F, 3, 2, 3), b(CUDA_R_32F, 2, 2, 2), d(cd, 3, 2, 3);
    a.fill(1.0f);
    b.fill(2.0f);
    d.fill(std::numeric_limits<float>::quiet_NaN());
    GemmProblem p;
    p.m = 3;
    p.n = 2;
    p.k = 2;
    p.a = a.view();
    p.b = b.view();
    p.c = p.d = d.view();
    p.a.type = p.b.type = CUDA_R_32F;
    compute_gemm(p);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(d.get(0, r, c), 4.0f);
  }
}

TEST(GemmCore, EmptyInnerDimensionGivesBetaCPlusBias) {
  for (cudaDataType cd : {CUDA_R_32F, CUDA_R_16BF})
    for (float beta : {0.0f, 1.0f}) {
      Case cs;
      cs.k = 0;
      cs.cd = cd;
      cs.beta = beta;
      cs.bias = true;
      run_case(cs, 61 + (beta != 0));
    }
}

TEST(GemmCore, ConcurrentProductsFromSeveralThreadsAreEachRight) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      for (int rep = 0; rep < 20; ++rep) {
        Case cs;
        cs.ta = (rep + t) % 2;
        cs.tb = rep % 3 == 0;
        cs.m = 33 + t;
        cs.n = 20 + rep % 5;
        cs.k = 48;
        cs.ab = t % 2 ? CUDA_R_16BF : CUDA_R_32F;
        run_case(cs, uint32_t(1000 + t * 100 + rep));
        if (::testing::Test::HasFailure()) ++failures[size_t(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

}  // namespace
}  // namespace vgpu::blas
