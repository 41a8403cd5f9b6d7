// Every CPU op's backward against central finite differences in f64 (relative error < 1e-6).
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend/backend.h"
#include "core/testing/gradcheck.h"

namespace ptdp {
namespace {

using testing::dot;
using testing::grad_rel_error;
using testing::randn;

constexpr double kTol = 1e-6;
constexpr DType F64 = DType::F64;

class CpuOpGrad : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

TEST_F(CpuOpGrad, LinearMatchesFiniteDifferences) {
  const int64_t n = 6, in = 5, out = 7;
  Tensor x = randn({n, in}, 1), w = randn({out, in}, 2), b = randn({out}, 3), r = randn({n, out}, 4);
  Tensor y = Tensor::empty({n, out}, F64);
  auto objective = [&] {
    be->linear_forward(y, x, w, &b);
    return dot(y, r);
  };
  Tensor dx = Tensor::zeros({n, in}, F64), dw = Tensor::zeros({out, in}, F64), db = Tensor::zeros({out}, F64);
  be->linear_backward(&dx, false, dw, &db, r, x, w);
  EXPECT_LT(grad_rel_error(objective, x, dx), kTol);
  EXPECT_LT(grad_rel_error(objective, w, dw), kTol);
  EXPECT_LT(grad_rel_error(objective, b, db), kTol);
}

TEST_F(CpuOpGrad, LinearBackwardAccumulatesWeightGradsAndOptionallyInputGrads) {
  const int64_t n = 3, in = 2, out = 4;
  Tensor x = randn({n, in}, 5), w = randn({out, in}, 6), dy = randn({n, out}, 7);
  Tensor dx = Tensor::zeros({n, in}, F64), dw = Tensor::zeros({out, in}, F64), db = Tensor::zeros({out}, F64);
  be->linear_backward(&dx, false, dw, &db, dy, x, w);
  Tensor dx1 = dx.clone(), dw1 = dw.clone();
  be->linear_backward(&dx, true, dw, &db, dy, x, w);
  for (int64_t i = 0; i < dw.numel(); ++i) EXPECT_DOUBLE_EQ(dw.data<double>()[i], 2 * dw1.data<double>()[i]);
  for (int64_t i = 0; i < dx.numel(); ++i) EXPECT_DOUBLE_EQ(dx.data<double>()[i], 2 * dx1.data<double>()[i]);
}

TEST_F(CpuOpGrad, LayerNormMatchesFiniteDifferences) {
  const int64_t n = 5, c = 9;
  Tensor x = randn({n, c}, 8, 2.0), g = randn({c}, 9), b = randn({c}, 10), r = randn({n, c}, 11);
  Tensor y = Tensor::empty({n, c}, F64), mean = Tensor::empty({n}, F64), rstd = Tensor::empty({n}, F64);
  auto objective = [&] {
    be->layernorm_forward(y, mean, rstd, x, g, b, 1e-5);
    return dot(y, r);
  };
  objective();
  Tensor dx = Tensor::zeros({n, c}, F64), dg = Tensor::zeros({c}, F64), db = Tensor::zeros({c}, F64);
  be->layernorm_backward(dx, dg, db, r, x, g, mean, rstd);
  EXPECT_LT(grad_rel_error(objective, x, dx), kTol);
  EXPECT_LT(grad_rel_error(objective, g, dg), kTol);
  EXPECT_LT(grad_rel_error(objective, b, db), kTol);
}

TEST_F(CpuOpGrad, LayerNormOutputHasZeroMeanAndUnitVariance) {
  const int64_t n = 3, c = 64;
  Tensor x = randn({n, c}, 12, 3.0), g = Tensor::empty({c}, F64), b = Tensor::zeros({c}, F64);
  be->fill(g, 1.0);
  Tensor y = Tensor::empty({n, c}, F64), mean = Tensor::empty({n}, F64), rstd = Tensor::empty({n}, F64);
  be->layernorm_forward(y, mean, rstd, x, g, b, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < c; ++i) m += y.data<double>()[r * c + i] / c;
    for (int64_t i = 0; i < c; ++i) v += std::pow(y.data<double>()[r * c + i] - m, 2) / c;
    EXPECT_NEAR(m, 0.0, 1e-12);
    EXPECT_NEAR(v, 1.0, 1e-12);
  }
}

TEST_F(CpuOpGrad, GeluMatchesFiniteDifferencesAndKnownValues) {
  Tensor x = randn({40}, 13, 2.0), r = randn({40}, 14), y = Tensor::empty({40}, F64);
  auto objective = [&] {
    be->gelu_forward(y, x);
    return dot(y, r);
  };
  Tensor dx = Tensor::empty({40}, F64);
  be->gelu_backward(dx, x, r);
  EXPECT_LT(grad_rel_error(objective, x, dx), kTol);
  Tensor one = Tensor::empty({1}, F64), out = Tensor::empty({1}, F64);
  one.data<double>()[0] = 1.0;
  be->gelu_forward(out, one);
  EXPECT_NEAR(out.data<double>()[0], 0.8411919906082768, 1e-12);  // tanh-approximated GeLU(1)
}

TEST_F(CpuOpGrad, AttentionMatchesFiniteDifferences) {
  const int b = 2, s = 5, a = 3, hd = 4;
  const int64_t n = int64_t(b) * s;
  Tensor qkv = randn({n, 3 * a * hd}, 15), r = randn({n, a * hd}, 16);
  Tensor y = Tensor::empty({n, a * hd}, F64), probs = Tensor::empty({b, a, s, s}, F64);
  auto objective = [&] {
    be->attention_forward(y, probs, qkv, b, s, a, hd);
    return dot(y, r);
  };
  objective();
  Tensor dqkv = Tensor::empty({n, 3 * a * hd}, F64);
  be->attention_backward(dqkv, r, qkv, probs, b, s, a, hd);
  EXPECT_LT(grad_rel_error(objective, qkv, dqkv), kTol);
}

TEST_F(CpuOpGrad, AttentionIsCausalAndRowsSumToOne) {
  const int b = 1, s = 6, a = 2, hd = 3;
  Tensor qkv = randn({s, 3 * a * hd}, 17), y = Tensor::empty({s, a * hd}, F64);
  Tensor probs = Tensor::empty({b, a, s, s}, F64);
  be->attention_forward(y, probs, qkv, b, s, a, hd);
  for (int h = 0; h < a; ++h)
    for (int i = 0; i < s; ++i) {
      double tot = 0;
      for (int j = 0; j < s; ++j) {
        double p = probs.data<double>()[(h * s + i) * s + j];
        if (j > i) {
          EXPECT_EQ(p, 0.0);
        }
        tot += p;
      }
      EXPECT_NEAR(tot, 1.0, 1e-12);
    }
  // The first position attends only to itself: its output is its own value vector.
  for (int h = 0; h < a; ++h)
    for (int d = 0; d < hd; ++d)
      EXPECT_NEAR(y.data<double>()[h * hd + d], qkv.data<double>()[h * 3 * hd + 2 * hd + d], 1e-12);
}

TEST_F(CpuOpGrad, EmbeddingMatchesFiniteDifferences) {
  const int s = 4, h = 3;
  const int64_t rows = 6, n = 8;
  Tensor tok = Tensor::empty({n}, DType::I32);
  const int32_t ids[] = {0, 5, 2, 2, 7, 1, 5, 3};  // 7 is outside this shard's 6 rows
  for (int i = 0; i < n; ++i) tok.data<int32_t>()[i] = ids[i];
  Tensor wte = randn({rows, h}, 18), wpe = randn({s, h}, 19), r = randn({n, h}, 20);
  Tensor x = Tensor::empty({n, h}, F64);
  auto objective = [&] {
    be->embedding_forward(x, tok, wte, 0, &wpe, s);
    return dot(x, r);
  };
  Tensor dwte = Tensor::zeros({rows, h}, F64), dwpe = Tensor::zeros({s, h}, F64);
  be->embedding_backward(dwte, &dwpe, r, tok, 0, s);
  EXPECT_LT(grad_rel_error(objective, wte, dwte), kTol);
  EXPECT_LT(grad_rel_error(objective, wpe, dwpe), kTol);
  objective();
  for (int i = 0; i < h; ++i)  // token 7 contributes only its position embedding
    EXPECT_DOUBLE_EQ(x.data<double>()[4 * h + i], wpe.data<double>()[0 * h + i]);
}

TEST_F(CpuOpGrad, CrossEntropyMatchesFiniteDifferencesAndIgnoresPadding) {
  const int64_t n = 5, v = 8, v_valid = 6;
  Tensor logits = randn({n, v}, 21, 2.0), tgt = Tensor::empty({n}, DType::I32);
  for (int i = 0; i < n; ++i) tgt.data<int32_t>()[i] = (3 * i + 1) % v_valid;
  Tensor mx = Tensor::empty({n}, F64), se = Tensor::empty({n}, F64), tl = Tensor::empty({n}, F64),
         loss = Tensor::empty({n}, F64);
  auto objective = [&] {
    be->xent_row_max(mx, logits, v_valid);
    be->xent_sum_exp(se, logits, mx, v_valid);
    be->xent_target_logit(tl, logits, tgt, 0, v_valid);
    be->xent_loss(loss, mx, se, tl);
    return be->sum(loss) * 0.5;
  };
  objective();
  Tensor dl = Tensor::empty({n, v}, F64);
  be->xent_backward(dl, logits, mx, se, tgt, 0, v_valid, 0.5);
  EXPECT_LT(grad_rel_error(objective, logits, dl), kTol);
  const double before = objective();
  for (int64_t r = 0; r < n; ++r) {
    logits.data<double>()[r * v + v - 1] = 1e3;  // huge padded logits change nothing
    EXPECT_EQ(dl.data<double>()[r * v + v - 1], 0.0);
  }
  EXPECT_DOUBLE_EQ(objective(), before);
  // A direct check of one row: -log softmax at the target.
  double m = -1e300, z = 0;
  for (int j = 0; j < v_valid; ++j) m = std::max(m, logits.data<double>()[j]);
  for (int j = 0; j < v_valid; ++j) z += std::exp(logits.data<double>()[j] - m);
  EXPECT_NEAR(loss.data<double>()[0], std::log(z) + m - logits.data<double>()[1], 1e-12);
}

TEST_F(CpuOpGrad, AdamWFirstStepMovesEachWeightByLearningRate) {
  // With bias correction the first Adam step is lr * g/|g| (+ eps); weight decay shrinks first.
  const int64_t n = 4;
  Tensor p = Tensor::empty({n}, DType::F32), g = Tensor::empty({n}, DType::F32);
  Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  const float gv[] = {0.5f, -2.0f, 1e-3f, -4.0f};
  for (int i = 0; i < n; ++i) {
    p.data<float>()[i] = 1.0f;
    g.data<float>()[i] = gv[i];
  }
  AdamWParams ap;
  ap.lr = 0.1;
  ap.weight_decay = 0.5;
  ap.eps = 1e-12;
  be->adamw(p, g, m, v, ap);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(p.data<float>()[i], 1.0 * (1 - 0.05) - 0.1 * (gv[i] > 0 ? 1 : -1), 1e-5);
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

TEST(GradCheck, DetectsAWrongGradient) {
  Tensor x = Tensor::empty({3}, DType::F64);
  testing::fill_normal(x, 1);
  auto objective = [&] {
    double s = 0;
    for (int i = 0; i < 3; ++i) s += x.data<double>()[i] * x.data<double>()[i];
    return s;
  };
  Tensor right = x.clone(), wrong = x.clone();
  for (int i = 0; i < 3; ++i) {
    right.data<double>()[i] = 2 * x.data<double>()[i];
    wrong.data<double>()[i] = 2.01 * x.data<double>()[i];
  }
  EXPECT_LT(testing::grad_rel_error(objective, x, right), 1e-8);
  EXPECT_GT(testing::grad_rel_error(objective, x, wrong), 1e-3);
}

}  // namespace
}  // namespace ptdp
