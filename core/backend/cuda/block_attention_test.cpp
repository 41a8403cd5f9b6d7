// The CUDA backend's block-attention ops (flash_attention_forward/backward, attention_merge,
// qkv_split/join, rope_rows) against the CPU backend's (f32) on random inputs whose sizes leave
// ragged tiles (s not a multiple of 32, heads of 16 to 128), with grouped-query heads, position
// offsets (rows with every key masked included), causal and not, several sequences: f32 within
// 1e-5, bf16 and f16 within 1e-2 (norm-wise relative error), the CPU running in f32 on the same
// rounded inputs. Also against the CUDA backend's unfused attention, and a block split in two key
// halves merged against the whole. Without a GPU these tests skip with the reason.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/testing/block_case.h"
#include "core/backend/cuda/testing/op_fixture.h"
#include "core/common/rng.h"

namespace ptdp::block_attention_test {
namespace {

constexpr DType F32 = DType::F32;

using Case = testing::BlockCase;
using testing::describe;

// Ragged tiles everywhere; GQA; offsets that leave rows with every key masked (q_pos 0, k_pos 40);
// a block in the past of the queries (all visible) and one partly in it; head sizes on both kernel
// variants (<= 64, <= 128).
const Case kCases[] = {
    {2, 45, 45, 4, 4, 16, 0, 0, true},    {1, 70, 70, 6, 2, 24, 0, 0, true},   {2, 37, 50, 4, 2, 16, 50, 20, true},
    {2, 45, 50, 4, 1, 8, 0, 40, true},    {2, 33, 65, 2, 1, 72, 0, 0, false},  {1, 40, 33, 2, 2, 128, 7, 0, true},
    {1, 20, 30, 4, 2, 32, 100, 0, true},
};

using testing::kNaN;
using testing::rounded;
Tensor uniform(Shape shape, uint64_t stream, double lo = -1, double hi = 1) {
  return testing::uniform_host(std::move(shape), 4242, stream, lo, hi);
}

class CudaBlockAttention : public testing::CudaOpTest {
 protected:
  CudaBlockAttention() : CudaOpTest(4242) {}

  // Norm-wise relative error; non-finite values (lse's -inf) must match in place and kind.
  void expect_close(const Tensor& dev, const Tensor& ref, const std::string& what, double tolerance = -1) {
    if (tolerance < 0) tolerance = tol;
    ASSERT_EQ(dev.numel(), ref.numel()) << what;
    const Tensor got = down(dev);
    const testing::Closeness c = testing::closeness(got, ref, /*strict_nonfinite=*/true);
    EXPECT_EQ(c.bad, 0) << what << ": " << c.bad << " elements differ in finiteness, the first at " << c.first_bad
                        << " (gpu " << (c.first_bad >= 0 ? got.data<float>()[c.first_bad] : 0.f) << ", cpu "
                        << (c.first_bad >= 0 ? ref.data<float>()[c.first_bad] : 0.f) << ")";
    const double rel = c.rel;
    EXPECT_LE(rel, tolerance) << what << " (" << dtype_name(dt) << "): relative error " << rel;
  }

  std::unique_ptr<Backend> cpu = make_cpu_backend();
};

TEST_P(CudaBlockAttention, FlashForwardMatchesCpu) {
  uint64_t seed = 10;
  for (const Case& c : kCases) {
    const std::string what = describe(c);
    const int64_t nq = int64_t(c.b) * c.sq, nk = int64_t(c.b) * c.sk;
    Tensor q = input({nq, int64_t(c.a) * c.hd}, ++seed, -2, 2), k = input({nk, int64_t(c.g) * c.hd}, ++seed, -2, 2),
           v = input({nk, int64_t(c.g) * c.hd}, ++seed);
    Tensor ry = Tensor::empty({nq, int64_t(c.a) * c.hd}, F32), rl = Tensor::empty({c.b, c.a, c.sq}, F32);
    cpu->flash_attention_forward(ry, rl, q, k, v, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal);
    Tensor y = poisoned(ry.shape(), dt), l = poisoned(rl.shape(), F32);
    Tensor gq = up(q), gk = up(k), gv = up(v);
    gpu->flash_attention_forward(y, l, gq, gk, gv, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal);
    expect_close(y, ry, "flash y, " + what);
    expect_close(l, rl, "flash lse, " + what);
  }
}

TEST_P(CudaBlockAttention, FlashBackwardAccumulatesTheCpuGradients) {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    const std::string what = describe(c);
    const int64_t nq = int64_t(c.b) * c.sq, nk = int64_t(c.b) * c.sk, lq = int64_t(c.a) * c.hd,
                  lk = int64_t(c.g) * c.hd;
    Tensor q = input({nq, lq}, ++seed, -2, 2), k = input({nk, lk}, ++seed, -2, 2), v = input({nk, lk}, ++seed),
           dy = input({nq, lq}, ++seed);
    Tensor y32 = Tensor::empty({nq, lq}, F32), lse = Tensor::empty({c.b, c.a, c.sq}, F32);
    cpu->flash_attention_forward(y32, lse, q, k, v, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal);
    Tensor y = rounded(y32, dt);
    Tensor dq0 = input({nq, lq}, ++seed), dk0 = input({nk, lk}, ++seed), dv0 = input({nk, lk}, ++seed);
    Tensor rdq = dq0.clone(), rdk = dk0.clone(), rdv = dv0.clone();
    cpu->flash_attention_backward(rdq, rdk, rdv, dy, q, k, v, y, lse, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos,
                                  c.k_pos, c.causal);
    Tensor gdq = up(dq0), gdk = up(dk0), gdv = up(dv0);
    gpu->flash_attention_backward(gdq, gdk, gdv, up(dy), up(q), up(k), up(v), up(y), up(lse, F32), c.b, c.sq, c.sk,
                                  c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal);
    expect_close(gdq, rdq, "flash dq, " + what);
    expect_close(gdk, rdk, "flash dk, " + what);
    expect_close(gdv, rdv, "flash dv, " + what);
    // accumulate false: the seeded values are overwritten, on both backends (the CPU's from zero).
    Tensor zdq = Tensor::zeros(dq0.shape(), dq0.dtype()), zdk = Tensor::zeros(dk0.shape(), dk0.dtype()),
           zdv = Tensor::zeros(dv0.shape(), dv0.dtype());
    cpu->flash_attention_backward(zdq, zdk, zdv, dy, q, k, v, y, lse, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos,
                                  c.k_pos, c.causal);
    Tensor cdq = dq0.clone(), cdk = dk0.clone(), cdv = dv0.clone();
    cpu->flash_attention_backward(cdq, cdk, cdv, dy, q, k, v, y, lse, c.b, c.sq, c.sk, c.a, c.g, c.hd, c.q_pos,
                                  c.k_pos, c.causal, false);
    for (auto [got, ref] : {std::pair{&cdq, &zdq}, std::pair{&cdk, &zdk}, std::pair{&cdv, &zdv}})
      for (int64_t i = 0; i < ref->numel(); ++i)
        ASSERT_EQ(got->data<float>()[i], ref->data<float>()[i]) << "cpu overwrite, " << what;
    gdq = up(dq0), gdk = up(dk0), gdv = up(dv0);
    gpu->flash_attention_backward(gdq, gdk, gdv, up(dy), up(q), up(k), up(v), up(y), up(lse, F32), c.b, c.sq, c.sk,
                                  c.a, c.g, c.hd, c.q_pos, c.k_pos, c.causal, false);
    expect_close(gdq, zdq, "flash dq overwritten, " + what);
    expect_close(gdk, zdk, "flash dk overwritten, " + what);
    expect_close(gdv, zdv, "flash dv overwritten, " + what);
  }
}

// Independent of the CPU's block attention: with q_pos = k_pos = 0, causal and g = a, the flash
// path (split, forward, backward, join) equals the unfused attention_forward/backward on the same
// fused projection.
TEST_P(CudaBlockAttention, FlashEqualsTheUnfusedAttentionOnOneWholeBlock) {
  const int b = 2, s = 45, a = 3, hd = 40;
  const int64_t n = int64_t(b) * s, lq = int64_t(a) * hd;
  Tensor qkv = up(input({n, 3 * lq}, 1, -2, 2)), dy = up(input({n, lq}, 2));
  Tensor uy = gpu->empty({n, lq}, dt), probs = gpu->empty({b, a, s, s}, dt), udqkv = gpu->empty({n, 3 * lq}, dt);
  gpu->attention_forward(uy, probs, qkv, b, s, a, hd);
  gpu->attention_backward(udqkv, dy, qkv, probs, b, s, a, hd);
  Tensor q = gpu->empty({n, lq}, dt), k = gpu->empty({n, lq}, dt), v = gpu->empty({n, lq}, dt);
  gpu->qkv_split(q, k, v, qkv, a, a, hd);
  Tensor y = poisoned({n, lq}, dt), lse = poisoned({b, a, s}, F32);
  gpu->flash_attention_forward(y, lse, q, k, v, b, s, s, a, a, hd, 0, 0, true);
  Tensor dq = gpu->empty({n, lq}, dt), dk = gpu->empty({n, lq}, dt), dv = gpu->empty({n, lq}, dt);
  for (Tensor* t : {&dq, &dk, &dv}) gpu->fill(*t, 0.0);
  gpu->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, a, hd, 0, 0, true);
  Tensor dqkv = poisoned({n, 3 * lq}, dt);
  gpu->qkv_join(dqkv, dq, dk, dv, a, a, hd);
  // bf16/f16: the unfused path rounds the probabilities to the compute dtype
  const double t = dt == F32 ? 1e-5 : 2e-2;
  expect_close(y, down(uy), "flash y against the unfused attention", t);
  expect_close(dqkv, down(udqkv), "flash dqkv against the unfused attention", t);
}

// A context-parallel ring's step: the keys in two blocks (the second at k_pos = sk1), each block's
// result merged, equal one block over all keys, forward and backward (dk and dv per block).
TEST_P(CudaBlockAttention, TwoKeyBlocksMergedEqualOneBlock) {
  const int b = 2, sq = 40, sk1 = 23, sk2 = 17, a = 4, g = 2, hd = 16;
  const int64_t q_pos = sk1 + sk2 - sq;  // the queries are the last sq of the keys' positions
  const int64_t nq = int64_t(b) * sq, lq = int64_t(a) * hd, lk = int64_t(g) * hd;
  Tensor q = input({nq, lq}, 1, -2, 2), k1 = input({int64_t(b) * sk1, lk}, 2, -2, 2),
         k2 = input({int64_t(b) * sk2, lk}, 3, -2, 2), v1 = input({int64_t(b) * sk1, lk}, 4),
         v2 = input({int64_t(b) * sk2, lk}, 5);
  // the whole: keys of each sequence in order (rows of k1's sequence, then k2's)
  Tensor k = Tensor::empty({int64_t(b) * (sk1 + sk2), lk}, F32), v = Tensor::empty(k.shape(), F32);
  for (int bi = 0; bi < b; ++bi)
    for (int j = 0; j < sk1 + sk2; ++j)
      for (int64_t c = 0; c < lk; ++c) {
        const bool first = j < sk1;
        const int64_t src = (first ? int64_t(bi) * sk1 + j : int64_t(bi) * sk2 + (j - sk1)) * lk + c;
        k.data<float>()[(int64_t(bi) * (sk1 + sk2) + j) * lk + c] = (first ? k1 : k2).data<float>()[src];
        v.data<float>()[(int64_t(bi) * (sk1 + sk2) + j) * lk + c] = (first ? v1 : v2).data<float>()[src];
      }
  Tensor gq = up(q);
  Tensor y = gpu->empty({nq, lq}, dt), lse = gpu->empty({b, a, sq}, F32);
  gpu->flash_attention_forward(y, lse, gq, up(k), up(v), b, sq, sk1 + sk2, a, g, hd, q_pos, 0, true);
  Tensor ym = gpu->empty({nq, lq}, dt), lm = gpu->empty({b, a, sq}, F32);
  Tensor y2 = gpu->empty({nq, lq}, dt), l2 = gpu->empty({b, a, sq}, F32);
  gpu->flash_attention_forward(ym, lm, gq, up(k1), up(v1), b, sq, sk1, a, g, hd, q_pos, 0, true);
  gpu->flash_attention_forward(y2, l2, gq, up(k2), up(v2), b, sq, sk2, a, g, hd, q_pos, sk1, true);
  gpu->attention_merge(ym, lm, y2, l2, b, sq, a, hd);
  expect_close(ym, down(y), "merged y");
  expect_close(lm, down(lse), "merged lse");
}

TEST_P(CudaBlockAttention, MergeMatchesCpuWithRowsMaskedOnEitherSide) {
  const int b = 2, sq = 37, a = 3, hd = 20;
  const int64_t n = int64_t(b) * sq, lq = int64_t(a) * hd;
  Tensor y = input({n, lq}, 1), y2 = input({n, lq}, 2);
  Tensor l = uniform({b, a, sq}, 3, -3, 3), l2 = uniform({b, a, sq}, 4, -3, 3);
  for (int64_t i = 0; i < l.numel(); i += 5) l.data<float>()[i] = -INFINITY;
  for (int64_t i = 0; i < l.numel(); i += 7) l2.data<float>()[i] = -INFINITY;
  Tensor gy = up(y), gl = up(l, F32);
  gpu->attention_merge(gy, gl, up(y2), up(l2, F32), b, sq, a, hd);
  cpu->attention_merge(y, l, y2, l2, b, sq, a, hd);
  expect_close(gy, y, "merged y");
  expect_close(gl, l, "merged lse", 1e-6);
}

TEST_P(CudaBlockAttention, QkvSplitAndJoinMatchCpu) {
  for (auto [n, a, g, hd] : {std::tuple{37, 4, 4, 16}, std::tuple{21, 6, 2, 24}, std::tuple{9, 8, 1, 40}}) {
    const int64_t w = int64_t(a + 2 * g) * hd, lq = int64_t(a) * hd, lk = int64_t(g) * hd;
    Tensor qkv = input({n, w}, 1);
    Tensor rq = Tensor::empty({n, lq}, F32), rk = Tensor::empty({n, lk}, F32), rv = Tensor::empty({n, lk}, F32);
    cpu->qkv_split(rq, rk, rv, qkv, a, g, hd);
    Tensor q = poisoned({n, lq}, dt), k = poisoned({n, lk}, dt), v = poisoned({n, lk}, dt);
    gpu->qkv_split(q, k, v, up(qkv), a, g, hd);
    expect_close(q, rq, "split q", 0);
    expect_close(k, rk, "split k", 0);
    expect_close(v, rv, "split v", 0);
    Tensor dq = input({n, lq}, 2), dk = input({n, lk}, 3), dv = input({n, lk}, 4), rd = Tensor::empty({n, w}, F32);
    cpu->qkv_join(rd, dq, dk, dv, a, g, hd);
    Tensor d = poisoned({n, w}, dt);
    gpu->qkv_join(d, up(dq), up(dk), up(dv), a, g, hd);
    expect_close(d, rd, "joined qkv grad", 0);
  }
}

TEST_P(CudaBlockAttention, RopeRowsMatchesCpuForwardAndInverseInPlace) {
  const int64_t n = 29;
  const int heads = 3, hd = 24;
  const double theta = 10000.0;
  Tensor x = input({n, int64_t(heads) * hd}, 1, -2, 2);
  Tensor pos = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) pos.data<int32_t>()[i] = int32_t((i * 37 + 5) % 4099);
  for (bool inverse : {false, true}) {
    Tensor ry = Tensor::empty(x.shape(), F32);
    cpu->rope_rows(ry, x, pos, heads, hd, theta, inverse);
    Tensor gx = up(x);
    gpu->rope_rows(gx, gx, up(pos), heads, hd, theta, inverse);
    expect_close(gx, ry, inverse ? "rope_rows inverse, in place" : "rope_rows, in place");
  }
}

TEST_P(CudaBlockAttention, HeadsLargerThanTheKernelsTakeAreRefused) {
  const int hd = 136;
  Tensor q = gpu->empty({4, hd}, dt), y = gpu->empty({4, hd}, dt), lse = gpu->empty({1, 1, 4}, F32);
  try {
    gpu->flash_attention_forward(y, lse, q, q, q, 1, 4, 4, 1, 1, hd, 0, 0, true);
    FAIL() << "a head of 136 was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("head sizes up to 128"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaBlockAttention, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ptdp::block_attention_test
#endif  // PTDP_HAVE_CUDA
