// The causal attention kernels (row blocks that skip the masked keys) against a direct
// evaluation of the definition, in f64, at lengths that give one block, two, and four with a
// ragged last block.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/backend/cpu/kernels.h"

namespace ptdp::cpu {
namespace {

struct Shape {
  int b, s, a, hd;
};

// y = softmax(q kᵀ / sqrt(hd), causal) v, and its gradients for dy, by the definition.
void reference(const Shape& sh, const std::vector<double>& qkv, const std::vector<double>& dy,
               std::vector<double>& y, std::vector<double>& dqkv) {
  const int64_t ld = 3 * sh.a * sh.hd, hl = int64_t(sh.a) * sh.hd;
  const double scale = 1 / std::sqrt(double(sh.hd));
  y.assign(size_t(sh.b) * sh.s * hl, 0);
  dqkv.assign(qkv.size(), 0);
  for (int bi = 0; bi < sh.b; ++bi)
    for (int h = 0; h < sh.a; ++h) {
      auto Q = [&](int i, int c) { return qkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + c]; };
      auto K = [&](int i, int c) { return qkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + sh.hd + c]; };
      auto V = [&](int i, int c) { return qkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + 2 * sh.hd + c]; };
      auto dQ = [&](int i, int c) -> double& { return dqkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + c]; };
      auto dK = [&](int i, int c) -> double& { return dqkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + sh.hd + c]; };
      auto dV = [&](int i, int c) -> double& { return dqkv[(bi * sh.s + i) * ld + h * 3 * sh.hd + 2 * sh.hd + c]; };
      for (int i = 0; i < sh.s; ++i) {
        std::vector<double> p(i + 1);
        double mx = -1e300, tot = 0;
        for (int j = 0; j <= i; ++j) {
          double d = 0;
          for (int c = 0; c < sh.hd; ++c) d += Q(i, c) * K(j, c);
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j <= i; ++j) tot += p[j] = std::exp(p[j] - mx);
        for (int j = 0; j <= i; ++j) p[j] /= tot;
        const double* g = &dy[(bi * sh.s + i) * hl + h * sh.hd];
        std::vector<double> dp(i + 1, 0);
        double dot = 0;
        for (int j = 0; j <= i; ++j) {
          for (int c = 0; c < sh.hd; ++c) {
            y[(bi * sh.s + i) * hl + h * sh.hd + c] += p[j] * V(j, c);
            dp[j] += g[c] * V(j, c);
            dV(j, c) += p[j] * g[c];
          }
          dot += dp[j] * p[j];
        }
        for (int j = 0; j <= i; ++j) {
          const double dsc = p[j] * (dp[j] - dot) * scale;
          for (int c = 0; c < sh.hd; ++c) {
            dQ(i, c) += dsc * K(j, c);
            dK(j, c) += dsc * Q(i, c);
          }
        }
      }
    }
}

class CausalAttention : public ::testing::TestWithParam<Shape> {};

TEST_P(CausalAttention, RowBlocksMatchTheDefinition) {
  const Shape sh = GetParam();
  const int64_t ld = 3 * sh.a * sh.hd, hl = int64_t(sh.a) * sh.hd;
  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> qkv(size_t(sh.b) * sh.s * ld), dy(size_t(sh.b) * sh.s * hl);
  for (auto& x : qkv) x = nd(rng);
  for (auto& x : dy) x = nd(rng);
  std::vector<double> want_y, want_d;
  reference(sh, qkv, dy, want_y, want_d);
  std::vector<double> y(want_y.size(), 7.0), probs(size_t(sh.b) * sh.a * sh.s * sh.s, 7.0), d(qkv.size(), 7.0);
  attention_forward<double>(y.data(), probs.data(), qkv.data(), sh.b, sh.s, sh.a, sh.hd);
  attention_backward<double>(d.data(), dy.data(), qkv.data(), probs.data(), sh.b, sh.s, sh.a, sh.hd);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want_y[i], 1e-11) << "y[" << i << "]";
  for (size_t i = 0; i < d.size(); ++i) ASSERT_NEAR(d[i], want_d[i], 1e-11) << "dqkv[" << i << "]";
  for (int64_t pr = 0; pr < int64_t(sh.b) * sh.a; ++pr)  // the masked probabilities are zero
    for (int i = 0; i < sh.s; ++i)
      for (int j = i + 1; j < sh.s; ++j) ASSERT_EQ(probs[(pr * sh.s + i) * sh.s + j], 0.0);
}

INSTANTIATE_TEST_SUITE_P(Lengths, CausalAttention,
                         ::testing::Values(Shape{2, 17, 2, 8}, Shape{1, 130, 2, 8}, Shape{2, 259, 1, 4}));

// Grouped-query attention: head j of the expanded layout holds query j and the key and value of
// group j / (a/g), read from Megatron-core's layout (per group: its queries, its key, its value);
// gqa_reduce is the transpose of gqa_expand (<expand(x), y> = <x, reduce(y)>).
TEST(GqaLayout, ExpandReadsMegatronsGroupLayoutAndReduceIsItsTranspose) {
  for (auto [a, g, hd] : {std::tuple{4, 2, 3}, std::tuple{6, 1, 2}, std::tuple{4, 4, 2}, std::tuple{8, 2, 1}}) {
    const int r = a / g;
    const int64_t n = 3, xw = int64_t(a + 2 * g) * hd, yw = int64_t(3) * a * hd;
    std::vector<double> x(size_t(n * xw)), y(size_t(n * yw), 7.0);
    for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
    gqa_expand<double>(y.data(), x.data(), n, a, g, hd);
    for (int64_t row = 0; row < n; ++row)
      for (int j = 0; j < a; ++j)
        for (int i = 0; i < hd; ++i) {
          const int64_t grp = row * xw + int64_t(j / r) * (r + 2) * hd;
          const double* h = y.data() + row * yw + int64_t(j) * 3 * hd;
          ASSERT_EQ(h[i], x[grp + (j % r) * hd + i]) << "q of head " << j;
          ASSERT_EQ(h[hd + i], x[grp + r * hd + i]) << "k of head " << j;
          ASSERT_EQ(h[2 * hd + i], x[grp + (r + 1) * hd + i]) << "v of head " << j;
        }
    std::mt19937 rng(11);
    std::normal_distribution<double> nd(0, 1);
    std::vector<double> xr(x.size()), dy(y.size()), dx(x.size(), 7.0);
    for (auto& v : xr) v = nd(rng);
    for (auto& v : dy) v = nd(rng);
    gqa_expand<double>(y.data(), xr.data(), n, a, g, hd);
    gqa_reduce<double>(dx.data(), dy.data(), n, a, g, hd);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += y[i] * dy[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += xr[i] * dx[i];
    EXPECT_NEAR(lhs, rhs, 1e-10 * (std::abs(lhs) + 1)) << "a=" << a << " g=" << g;
  }
}

}  // namespace
}  // namespace ptdp::cpu
