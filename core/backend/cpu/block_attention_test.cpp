// The CPU block-attention ops against the causal attention ops they generalise (attention_forward
// and _backward, gqa_expand and _reduce, rope), against finite differences in f64, and the
// merge of key blocks against the whole.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/backend/backend.h"
#include "core/testing/gradcheck.h"

namespace ptdp {
namespace {

using testing::dot;
using testing::grad_rel_error;
using testing::randn;

constexpr DType kBlockF64 = DType::F64;

// Norm-wise relative difference ||got - want|| / ||want|| of two tensors of one numel (any float
// dtype, compared in f64).
double block_rel_diff(const Tensor& got, const Tensor& want) {
  Tensor g = Tensor::empty({got.numel()}, kBlockF64), w = Tensor::empty({want.numel()}, kBlockF64);
  g.copy_from(got);
  w.copy_from(want);
  double num = 0, den = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double d = g.data<double>()[i] - w.data<double>()[i];
    num += d * d;
    den += w.data<double>()[i] * w.data<double>()[i];
  }
  return std::sqrt(num / den);
}

Tensor stored_as(const Tensor& t, DType dt) {
  Tensor r = Tensor::empty(t.shape(), dt);
  r.copy_from(t);
  return r;
}

class BlockAttention : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();

  struct Qkv {
    Tensor q, k, v;
  };
  // q, k, v of the fused projection x [n, (a + 2g)*hd].
  Qkv split(const Tensor& x, int a, int g, int hd) {
    const int64_t n = x.dim(0);
    Qkv r{Tensor::empty({n, int64_t(a) * hd}, x.dtype()), Tensor::empty({n, int64_t(g) * hd}, x.dtype()),
          Tensor::empty({n, int64_t(g) * hd}, x.dtype())};
    be->qkv_split(r.q, r.k, r.v, x, a, g, hd);
    return r;
  }
};

// With g = a the fused projection is attention_forward's per-head q | k | v layout: flash over the
// whole sequence at position 0 (causal) is attention_forward, and its backward attention_backward.
TEST_F(BlockAttention, WholeCausalSequenceEqualsAttentionOps) {
  const int b = 2, s = 70, a = 3, hd = 8;  // s crosses the kernel's 64-row blocks
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor qkv = stored_as(randn({b * s, 3 * a * hd}, 1), dt), dy = stored_as(randn({b * s, a * hd}, 2), dt);
    Tensor y_ref = Tensor::empty({b * s, a * hd}, dt), probs = Tensor::empty({b, a, s, s}, dt);
    be->attention_forward(y_ref, probs, qkv, b, s, a, hd);
    Tensor dqkv_ref = Tensor::empty(qkv.shape(), dt);
    be->attention_backward(dqkv_ref, dy, qkv, probs, b, s, a, hd);

    const Qkv x = split(qkv, a, a, hd);
    Tensor y = Tensor::empty({b * s, a * hd}, dt), lse = Tensor::empty({b, a, s}, acc_dtype(dt));
    be->flash_attention_forward(y, lse, x.q, x.k, x.v, b, s, s, a, a, hd, 0, 0, true);
    const double tol = dt == kBlockF64 ? 1e-12 : 1e-5;
    EXPECT_LT(block_rel_diff(y, y_ref), tol) << dtype_name(dt);

    Tensor dq = Tensor::zeros(x.q.shape(), dt), dk = Tensor::zeros(x.k.shape(), dt),
           dv = Tensor::zeros(x.v.shape(), dt), dqkv = Tensor::empty(qkv.shape(), dt);
    be->flash_attention_backward(dq, dk, dv, dy, x.q, x.k, x.v, y, lse, b, s, s, a, a, hd, 0, 0, true);
    be->qkv_join(dqkv, dq, dk, dv, a, a, hd);
    EXPECT_LT(block_rel_diff(dqkv, dqkv_ref), tol) << dtype_name(dt);
  }
}

TEST_F(BlockAttention, LseIsTheLogSumExpOfTheVisibleScores) {
  const int b = 1, sq = 5, sk = 7, a = 2, g = 1, hd = 4;
  const int64_t q_pos = 10, k_pos = 8;
  Tensor q = randn({sq, a * hd}, 3), k = randn({sk, g * hd}, 4), v = randn({sk, g * hd}, 5);
  Tensor y = Tensor::empty({sq, a * hd}, kBlockF64), lse = Tensor::empty({b, a, sq}, kBlockF64);
  be->flash_attention_forward(y, lse, q, k, v, b, sq, sk, a, g, hd, q_pos, k_pos, true);
  for (int h = 0; h < a; ++h)
    for (int i = 0; i < sq; ++i) {
      double tot = 0;
      std::vector<double> w;
      for (int j = 0; j < sk && k_pos + j <= q_pos + i; ++j) {
        double d = 0;
        for (int c = 0; c < hd; ++c) d += q.data<double>()[i * a * hd + h * hd + c] * k.data<double>()[j * hd + c];
        w.push_back(std::exp(d / 2));  // sqrt(hd) = 2
        tot += w.back();
      }
      EXPECT_NEAR(lse.data<double>()[h * sq + i], std::log(tot), 1e-12);
      for (int c = 0; c < hd; ++c) {
        double want = 0;
        for (size_t j = 0; j < w.size(); ++j) want += w[j] / tot * v.data<double>()[j * hd + c];
        EXPECT_NEAR(y.data<double>()[i * a * hd + h * hd + c], want, 1e-12);
      }
    }
}

// Keys [0, s1) and [s1, s) as two blocks (the second wholly masked for rows below s1), merged in
// either order, are the whole; so is the backward summed over the blocks with the merged y, lse.
TEST_F(BlockAttention, KeyBlocksMergedEqualTheWhole) {
  const int b = 2, s = 12, s1 = 5, a = 4, g = 2, hd = 6;
  const Qkv x = split(randn({b * s, (a + 2 * g) * hd}, 6), a, g, hd);
  Tensor dy = randn({b * s, a * hd}, 7);
  Tensor y = Tensor::empty({b * s, a * hd}, kBlockF64), lse = Tensor::empty({b, a, s}, kBlockF64);
  be->flash_attention_forward(y, lse, x.q, x.k, x.v, b, s, s, a, g, hd, 0, 0, true);

  // k and v rows of one key block [j0, j1) of each sequence.
  auto keys = [&](const Tensor& t, int j0, int j1) {
    Tensor r = Tensor::empty({b * (j1 - j0), t.dim(1)}, kBlockF64);
    for (int bi = 0; bi < b; ++bi)
      r.slice_rows(bi * (j1 - j0), (bi + 1) * (j1 - j0)).copy_from(t.slice_rows(bi * s + j0, bi * s + j1));
    return r;
  };
  const int bounds[2][2] = {{0, s1}, {s1, s}};
  for (int first : {0, 1}) {
    Tensor ym = Tensor::empty(y.shape(), kBlockF64), lm = Tensor::empty(lse.shape(), kBlockF64);
    Tensor yb = Tensor::empty(y.shape(), kBlockF64), lb = Tensor::empty(lse.shape(), kBlockF64);
    for (int n = 0; n < 2; ++n) {
      const int j0 = bounds[first ^ n][0], j1 = bounds[first ^ n][1];
      Tensor kb = keys(x.k, j0, j1), vb = keys(x.v, j0, j1);
      be->flash_attention_forward(n == 0 ? ym : yb, n == 0 ? lm : lb, x.q, kb, vb, b, s, j1 - j0, a, g, hd, 0, j0,
                                  true);
      if (n == 1) be->attention_merge(ym, lm, yb, lb, b, s, a, hd);
    }
    EXPECT_LT(block_rel_diff(ym, y), 1e-13) << "first block " << first;
    EXPECT_LT(block_rel_diff(lm, lse), 1e-13) << "first block " << first;
  }

  Tensor dq = Tensor::zeros(x.q.shape(), kBlockF64), dk = Tensor::zeros(x.k.shape(), kBlockF64),
         dv = Tensor::zeros(x.v.shape(), kBlockF64);
  be->flash_attention_backward(dq, dk, dv, dy, x.q, x.k, x.v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq2 = Tensor::zeros(x.q.shape(), kBlockF64), dk2 = Tensor::zeros(x.k.shape(), kBlockF64),
         dv2 = Tensor::zeros(x.v.shape(), kBlockF64);
  for (const auto& bd : bounds) {
    const int j0 = bd[0], j1 = bd[1];
    Tensor kb = keys(x.k, j0, j1), vb = keys(x.v, j0, j1);
    Tensor dkb = Tensor::zeros(kb.shape(), kBlockF64), dvb = Tensor::zeros(vb.shape(), kBlockF64);
    be->flash_attention_backward(dq2, dkb, dvb, dy, x.q, kb, vb, y, lse, b, s, j1 - j0, a, g, hd, 0, j0, true);
    for (int bi = 0; bi < b; ++bi) {
      dk2.slice_rows(bi * s + j0, bi * s + j1).copy_from(dkb.slice_rows(bi * (j1 - j0), (bi + 1) * (j1 - j0)));
      dv2.slice_rows(bi * s + j0, bi * s + j1).copy_from(dvb.slice_rows(bi * (j1 - j0), (bi + 1) * (j1 - j0)));
    }
  }
  EXPECT_LT(block_rel_diff(dq2, dq), 1e-13);
  EXPECT_LT(block_rel_diff(dk2, dk), 1e-13);
  EXPECT_LT(block_rel_diff(dv2, dv), 1e-13);
}

TEST_F(BlockAttention, BackwardMatchesFiniteDifferencesWithOffsetsAndGroups) {
  const int b = 2, sq = 5, sk = 6, a = 4, g = 2, hd = 4;
  struct Case {
    int64_t q_pos, k_pos;
    bool causal;
  };
  for (const Case cs : {Case{0, 0, true}, Case{7, 4, true}, Case{3, 9, false}}) {
    Tensor q = randn({b * sq, a * hd}, 8), k = randn({b * sk, g * hd}, 9), v = randn({b * sk, g * hd}, 10);
    Tensor r = randn({b * sq, a * hd}, 11);
    Tensor y = Tensor::empty({b * sq, a * hd}, kBlockF64), lse = Tensor::empty({b, a, sq}, kBlockF64);
    auto objective = [&] {
      be->flash_attention_forward(y, lse, q, k, v, b, sq, sk, a, g, hd, cs.q_pos, cs.k_pos, cs.causal);
      return dot(y, r);
    };
    objective();
    Tensor dq = Tensor::zeros(q.shape(), kBlockF64), dk = Tensor::zeros(k.shape(), kBlockF64),
           dv = Tensor::zeros(v.shape(), kBlockF64);
    be->flash_attention_backward(dq, dk, dv, r, q, k, v, y, lse, b, sq, sk, a, g, hd, cs.q_pos, cs.k_pos, cs.causal);
    const std::string what = "q_pos " + std::to_string(cs.q_pos) + " k_pos " + std::to_string(cs.k_pos);
    EXPECT_LT(grad_rel_error(objective, q, dq), 1e-6) << what;
    EXPECT_LT(grad_rel_error(objective, k, dk), 1e-6) << what;
    EXPECT_LT(grad_rel_error(objective, v, dv), 1e-6) << what;
  }
}

TEST_F(BlockAttention, BackwardAccumulates) {
  const int b = 1, s = 6, a = 2, g = 1, hd = 4;
  Tensor q = randn({s, a * hd}, 12), k = randn({s, g * hd}, 13), v = randn({s, g * hd}, 14), dy = randn({s, a * hd}, 15);
  Tensor y = Tensor::empty({s, a * hd}, kBlockF64), lse = Tensor::empty({b, a, s}, kBlockF64);
  be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq = Tensor::zeros(q.shape(), kBlockF64), dk = Tensor::zeros(k.shape(), kBlockF64), dv = Tensor::zeros(v.shape(), kBlockF64);
  be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq1 = dq.clone(), dk1 = dk.clone(), dv1 = dv.clone();
  be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  be->scale_(dq1, 2);
  be->scale_(dk1, 2);
  be->scale_(dv1, 2);
  EXPECT_LT(block_rel_diff(dq, dq1), 1e-15);
  EXPECT_LT(block_rel_diff(dk, dk1), 1e-15);
  EXPECT_LT(block_rel_diff(dv, dv1), 1e-15);
}

// Grouped-query heads read natively equal gqa_expand + attention_forward, and the backward equals
// attention_backward + gqa_reduce.
TEST_F(BlockAttention, GroupedQueryHeadsEqualExpandedAttention) {
  const int b = 2, s = 9, a = 6, g = 2, hd = 4;
  Tensor x = randn({b * s, (a + 2 * g) * hd}, 16), dy = randn({b * s, a * hd}, 17);
  Tensor wide = Tensor::empty({b * s, 3 * a * hd}, kBlockF64), y_ref = Tensor::empty({b * s, a * hd}, kBlockF64);
  Tensor probs = Tensor::empty({b, a, s, s}, kBlockF64), dwide = Tensor::empty(wide.shape(), kBlockF64);
  Tensor dx_ref = Tensor::empty(x.shape(), kBlockF64);
  be->gqa_expand(wide, x, a, g, hd);
  be->attention_forward(y_ref, probs, wide, b, s, a, hd);
  be->attention_backward(dwide, dy, wide, probs, b, s, a, hd);
  be->gqa_reduce(dx_ref, dwide, a, g, hd);

  const Qkv t = split(x, a, g, hd);
  Tensor y = Tensor::empty({b * s, a * hd}, kBlockF64), lse = Tensor::empty({b, a, s}, kBlockF64);
  be->flash_attention_forward(y, lse, t.q, t.k, t.v, b, s, s, a, g, hd, 0, 0, true);
  EXPECT_LT(block_rel_diff(y, y_ref), 1e-13);
  Tensor dq = Tensor::zeros(t.q.shape(), kBlockF64), dk = Tensor::zeros(t.k.shape(), kBlockF64),
         dv = Tensor::zeros(t.v.shape(), kBlockF64), dx = Tensor::empty(x.shape(), kBlockF64);
  be->flash_attention_backward(dq, dk, dv, dy, t.q, t.k, t.v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  be->qkv_join(dx, dq, dk, dv, a, g, hd);
  EXPECT_LT(block_rel_diff(dx, dx_ref), 1e-13);
}

TEST_F(BlockAttention, FullyMaskedRowsGiveZeroAndMinusInfinityAndMergeIgnoresThem) {
  const int b = 1, sq = 8, sk = 4, a = 2, g = 2, hd = 4;
  const int64_t q_pos = 0, k_pos = 5;  // rows 0..4 see no key
  Tensor q = randn({sq, a * hd}, 18), k = randn({sk, g * hd}, 19), v = randn({sk, g * hd}, 20);
  Tensor y = Tensor::empty({sq, a * hd}, kBlockF64), lse = Tensor::empty({b, a, sq}, kBlockF64);
  be->fill(y, 7.0);
  be->flash_attention_forward(y, lse, q, k, v, b, sq, sk, a, g, hd, q_pos, k_pos, true);
  for (int h = 0; h < a; ++h)
    for (int i = 0; i < sq; ++i) {
      const double l = lse.data<double>()[h * sq + i];
      if (i < 5) {
        EXPECT_TRUE(std::isinf(l) && l < 0) << "row " << i;
        for (int c = 0; c < hd; ++c) EXPECT_EQ(y.data<double>()[i * a * hd + h * hd + c], 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(l)) << "row " << i;
      }
    }
  // Merging the masked rows into another block's result leaves those rows as they were.
  Tensor y0 = randn({sq, a * hd}, 21), l0 = randn({b, a, sq}, 22);
  Tensor y1 = y0.clone(), l1 = l0.clone();
  be->attention_merge(y1, l1, y, lse, b, sq, a, hd);
  for (int i = 0; i < 5; ++i)
    for (int c = 0; c < a * hd; ++c) EXPECT_EQ(y1.data<double>()[i * a * hd + c], y0.data<double>()[i * a * hd + c]);
  // Their backward adds nothing either.
  Tensor dq = Tensor::zeros(q.shape(), kBlockF64), dk = Tensor::zeros(k.shape(), kBlockF64), dv = Tensor::zeros(v.shape(), kBlockF64);
  Tensor dy = randn({sq, a * hd}, 23);
  be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, sq, sk, a, g, hd, q_pos, k_pos, true);
  for (int64_t i = 0; i < 5 * a * hd; ++i) EXPECT_EQ(dq.data<double>()[i], 0.0);
  EXPECT_TRUE(std::isfinite(be->sum_squares(dk)) && std::isfinite(be->sum_squares(dv)));
}

TEST_F(BlockAttention, MergeOfTwoPartialsIsTheirSoftmaxWeightedSum) {
  const int b = 1, sq = 1, a = 1, hd = 2;
  Tensor y = Tensor::empty({1, 2}, kBlockF64), lse = Tensor::empty({1, 1, 1}, kBlockF64);
  Tensor y2 = Tensor::empty({1, 2}, kBlockF64), lse2 = Tensor::empty({1, 1, 1}, kBlockF64);
  y.data<double>()[0] = 1, y.data<double>()[1] = 2, lse.data<double>()[0] = std::log(1.0);
  y2.data<double>()[0] = 4, y2.data<double>()[1] = 8, lse2.data<double>()[0] = std::log(3.0);
  be->attention_merge(y, lse, y2, lse2, b, sq, a, hd);
  EXPECT_NEAR(lse.data<double>()[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(y.data<double>()[0], 0.25 * 1 + 0.75 * 4, 1e-15);
  EXPECT_NEAR(y.data<double>()[1], 0.25 * 2 + 0.75 * 8, 1e-15);
}

TEST_F(BlockAttention, QkvSplitAndJoinAreTransposes) {
  const int n = 5, a = 6, g = 3, hd = 2;
  Tensor x = randn({n, (a + 2 * g) * hd}, 24);
  const Qkv t = split(x, a, g, hd);
  Tensor back = Tensor::empty(x.shape(), kBlockF64);
  be->qkv_join(back, t.q, t.k, t.v, a, g, hd);
  EXPECT_EQ(block_rel_diff(back, x), 0.0);
  Tensor wq = randn(t.q.shape(), 25), wk = randn(t.k.shape(), 26), wv = randn(t.v.shape(), 27);
  Tensor w = Tensor::empty(x.shape(), kBlockF64);
  be->qkv_join(w, wq, wk, wv, a, g, hd);
  EXPECT_NEAR(dot(t.q, wq) + dot(t.k, wk) + dot(t.v, wv), dot(x, w), 1e-12);
  // Group 1's second query head is query head 3; its key is key head 1.
  const int r = a / g, w_row = (a + 2 * g) * hd;
  EXPECT_EQ(t.q.data<double>()[3 * hd], x.data<double>()[(1 * (r + 2) + 1) * hd]);
  EXPECT_EQ(t.k.data<double>()[1 * hd], x.data<double>()[(1 * (r + 2) + r) * hd]);
  EXPECT_EQ(t.v.data<double>()[(n - 1) * g * hd + 2 * hd + 1],
            x.data<double>()[(n - 1) * w_row + (2 * (r + 2) + r + 1) * hd + 1]);
}

// rope_rows at positions row mod s is rope on the q and k heads, bit for bit (f32).
TEST_F(BlockAttention, RopeRowsAtRowModSEqualsRope) {
  const int b = 2, s = 5, a = 3, hd = 8;
  const double theta = 10000;
  Tensor qkv = stored_as(randn({b * s, 3 * a * hd}, 28), DType::F32), roped = Tensor::empty(qkv.shape(), DType::F32);
  be->rope(roped, qkv, s, a, hd, theta, false);
  const Qkv want = split(roped, a, a, hd), x = split(qkv, a, a, hd);
  Tensor pos = Tensor::empty({b * s}, DType::I32);
  for (int r = 0; r < b * s; ++r) pos.data<int32_t>()[r] = r % s;
  Tensor q = Tensor::empty(x.q.shape(), DType::F32), k = Tensor::empty(x.k.shape(), DType::F32);
  be->rope_rows(q, x.q, pos, a, hd, theta, false);
  be->rope_rows(k, x.k, pos, a, hd, theta, false);
  EXPECT_EQ(block_rel_diff(q, want.q), 0.0);
  EXPECT_EQ(block_rel_diff(k, want.k), 0.0);
}

TEST_F(BlockAttention, RopeRowsAtArbitraryPositionsMatchesTheFormulaAndInverts) {
  const int n = 4, heads = 2, hd = 6;
  const double theta = 500;
  const int32_t positions[n] = {17, 3, 0, 1000};
  Tensor pos = Tensor::empty({n}, DType::I32);
  for (int r = 0; r < n; ++r) pos.data<int32_t>()[r] = positions[r];
  Tensor x = randn({n, heads * hd}, 29), y = Tensor::empty(x.shape(), kBlockF64);
  be->rope_rows(y, x, pos, heads, hd, theta, false);
  const int half = hd / 2;
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double ang = positions[r] * std::pow(theta, -2.0 * i / hd);
        const double* xi = x.data<double>() + r * heads * hd + h * hd;
        const double* yi = y.data<double>() + r * heads * hd + h * hd;
        EXPECT_NEAR(yi[i], xi[i] * std::cos(ang) - xi[i + half] * std::sin(ang), 1e-12);
        EXPECT_NEAR(yi[i + half], xi[i + half] * std::cos(ang) + xi[i] * std::sin(ang), 1e-12);
      }
  be->rope_rows(y, y, pos, heads, hd, theta, true);  // in place, the inverse
  EXPECT_LT(block_rel_diff(y, x), 1e-14);
}

// bf16 storage computes in f32 (widened): close to the f32 result at bf16's precision.
TEST_F(BlockAttention, SixteenBitStorageComputesLikeF32) {
  const int b = 1, s = 10, a = 2, g = 1, hd = 8;
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor q = stored_as(randn({s, a * hd}, 30), dt), k = stored_as(randn({s, g * hd}, 31), dt),
           v = stored_as(randn({s, g * hd}, 32), dt);
    Tensor y = Tensor::empty({s, a * hd}, dt), lse = Tensor::empty({b, a, s}, DType::F32);
    be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
    Tensor y32 = Tensor::empty({s, a * hd}, DType::F32), lse32 = Tensor::empty({b, a, s}, DType::F32);
    be->flash_attention_forward(y32, lse32, stored_as(q, DType::F32), stored_as(k, DType::F32), stored_as(v, DType::F32), b, s, s,
                                a, g, hd, 0, 0, true);
    EXPECT_LT(block_rel_diff(y, y32), 1e-2) << dtype_name(dt);
    EXPECT_LT(block_rel_diff(lse, lse32), 1e-6) << dtype_name(dt);
    Tensor dq = Tensor::zeros(q.shape(), dt), dk = Tensor::zeros(k.shape(), dt), dv = Tensor::zeros(v.shape(), dt);
    be->flash_attention_backward(dq, dk, dv, y, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);
    EXPECT_TRUE(std::isfinite(be->sum_squares(dq)) && be->sum_squares(dk) > 0);
  }
}

}  // namespace
}  // namespace ptdp
