// Every CUDA backend op against the CPU backend (f32) on random inputs at awkward shapes:
// f32 within 1e-5, bf16 and f16 within 1e-2 (norm-wise relative error), the CPU running in
// f32 on the same bf16/f16-rounded inputs. Outputs are poisoned with NaN before each run so
// an unwritten element fails; accumulated outputs start from random values. Without a GPU
// these tests skip with the reason; the checks that need no device run everywhere.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/gemm.h"
#include "core/backend/cuda/testing/op_fixture.h"
#include "core/common/rng.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

namespace ptdp {
namespace {

constexpr DType F32 = DType::F32;

using testing::kNaN;
using testing::rounded;
// Host f32 tensor, uniform in [lo, hi).
Tensor uniform(Shape shape, uint64_t stream, double lo = -1, double hi = 1) {
  return testing::uniform_host(std::move(shape), 2024, stream, lo, hi);
}

Tensor tokens(int64_t n, int64_t lo, int64_t hi, uint64_t stream) {
  Tensor t = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i)
    t.data<int32_t>()[i] = int32_t(lo + int64_t(uniform01(99, stream, uint64_t(i)) * double(hi - lo)));
  return t;
}

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

class CudaOps : public testing::CudaOpTest {
 protected:
  CudaOps() : CudaOpTest(2024) {}
  Tensor cpu_empty(Shape shape) { return Tensor::empty(std::move(shape), F32); }

  // Norm-wise relative error of the device result against the CPU reference.
  void expect_close(const Tensor& dev, const Tensor& ref, const char* what, double tolerance = -1) {
    if (tolerance < 0) tolerance = tol;
    ASSERT_EQ(dev.numel(), ref.numel()) << what;
    const Tensor got = down(dev);
    const testing::Closeness c = testing::closeness(got, ref, /*strict_nonfinite=*/false);
    EXPECT_EQ(c.bad, 0) << what << ": " << c.bad << " elements non-finite on one side only, the first at "
                        << c.first_bad << " (gpu " << (c.first_bad >= 0 ? got.data<float>()[c.first_bad] : 0.f)
                        << ", cpu " << (c.first_bad >= 0 ? ref.data<float>()[c.first_bad] : 0.f) << ")";
    const double rel = c.rel, max_abs = c.max_abs;
    EXPECT_LT(rel, tolerance) << what << " (" << dtype_name(dt) << "): relative error " << rel << ", max abs error "
                              << max_abs;
  }

  std::unique_ptr<Backend> cpu = make_cpu_backend();
};

TEST_P(CudaOps, LinearForwardMatchesCpuWithAndWithoutBias) {
  for (auto [n, in, out] : {std::tuple{37, 96, 200}, std::tuple{301, 1024, 768}, std::tuple{1, 200, 33}}) {
    Tensor x = input({n, in}, 1), w = input({out, in}, 2), b = input({out}, 3);
    Tensor ref = cpu_empty({n, out}), ref_nb = cpu_empty({n, out});
    cpu->linear_forward(ref, x, w, &b);
    cpu->linear_forward(ref_nb, x, w, nullptr);
    Tensor dx = up(x), dw = up(w), dbias = up(b);
    Tensor y = poisoned({n, out}, dt);
    gpu->linear_forward(y, dx, dw, &dbias);
    expect_close(y, ref, "linear y with bias");
    gpu->fill(y, kNaN);
    gpu->linear_forward(y, dx, dw, nullptr);
    expect_close(y, ref_nb, "linear y without bias");
  }
}

// A bias 2 or 4 bytes past an aligned address (no epilogue: a broadcast kernel), and one 16 bytes
// past it, which the BIAS epilogue takes: cuBLASLt's heuristic must see that bias (the vgpu
// refuses an algorithm chosen for another bias alignment).
TEST_P(CudaOps, LinearForwardTakesABiasAtAnUnalignedOffset) {
  const int64_t n = 45, in = 96, out = 200;
  Tensor x = input({n, in}, 4), w = input({out, in}, 5), b = input({out}, 6);
  Tensor ref = cpu_empty({n, out});
  cpu->linear_forward(ref, x, w, &b);
  for (int64_t offset : {int64_t(1), int64_t(16 / dtype_size(dt))}) {
    Tensor holder = gpu->empty({out + offset}, dt);
    Tensor bias = holder.view(offset, {out});
    gpu->copy(bias, b);
    Tensor dx = up(x), dw = up(w), y = poisoned({n, out}, dt);
    gpu->linear_forward(y, dx, dw, &bias);
    const std::string what = "linear y, bias at an offset of " + std::to_string(offset * dtype_size(dt)) + " bytes";
    expect_close(y, ref, what.c_str());
  }
}

TEST_P(CudaOps, LinearBackwardOverwritesOrAccumulatesDxAndAccumulatesWeightAndBiasGrads) {
  const int64_t n = 37, in = 96, out = 200;
  const DType acc = acc_dtype(dt);
  Tensor x = input({n, in}, 7), w = input({out, in}, 8), dy = input({n, out}, 9);
  Tensor dw0 = uniform({out, in}, 10), db0 = uniform({out}, 11), dx0 = input({n, in}, 12);
  // overwrite dx
  Tensor rdx = cpu_empty({n, in}), rdw = dw0.clone(), rdb = db0.clone();
  cpu->linear_backward(&rdx, false, rdw, &rdb, dy, x, w);
  Tensor gx = up(x), gw = up(w), gdy = up(dy);
  Tensor gdx = poisoned({n, in}, dt), gdw = up(dw0, acc), gdb = up(db0, acc);
  gpu->linear_backward(&gdx, false, gdw, &gdb, gdy, gx, gw);
  expect_close(gdx, rdx, "linear dx");
  expect_close(gdw, rdw, "linear dw (accumulated in f32)");
  expect_close(gdb, rdb, "linear db (accumulated in f32)");
  // accumulate into dx; no bias grad
  Tensor rdx2 = dx0.clone(), rdw2 = dw0.clone();
  cpu->linear_backward(&rdx2, true, rdw2, nullptr, dy, x, w);
  Tensor gdx2 = up(dx0), gdw2 = up(dw0, acc);
  gpu->linear_backward(&gdx2, true, gdw2, nullptr, gdy, gx, gw);
  expect_close(gdx2, rdx2, "linear dx accumulated");
  expect_close(gdw2, rdw2, "linear dw, second case");
  // no dx at all
  Tensor rdw3 = dw0.clone();
  cpu->linear_backward(nullptr, false, rdw3, nullptr, dy, x, w);
  Tensor gdw3 = up(dw0, acc);
  gpu->linear_backward(nullptr, false, gdw3, nullptr, gdy, gx, gw);
  expect_close(gdw3, rdw3, "linear dw without dx");
}

// Rows of 16-byte packs (200, 96, 1032) and of elements one by one (1030), as the kernels choose.
TEST_P(CudaOps, LayerNormForwardMatchesCpu) {
  for (auto [n, c] : {std::pair{37, 200}, std::pair{33, 96}, std::pair{64, 1032}, std::pair{20, 1030}}) {
    Tensor x = input({n, c}, 13, -2, 3), g = input({c}, 14), b = input({c}, 15);
    Tensor ry = cpu_empty({n, c}), rm = cpu_empty({n}), rr = cpu_empty({n});
    cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
    Tensor y = poisoned({n, c}, dt), m = poisoned({n}, F32), r = poisoned({n}, F32);
    Tensor gx = up(x), gg = up(g), gb = up(b);
    gpu->layernorm_forward(y, m, r, gx, gg, gb, 1e-5);
    expect_close(y, ry, "layernorm y");
    expect_close(m, rm, "layernorm mean", 1e-5);
    expect_close(r, rr, "layernorm rstd", 1e-5);
  }
}

// The residual add folded into the norm: x += r, then the norm of the sum (kept in x), as the
// device's add_ and then its norm: the same roundings, so the same values.
TEST_P(CudaOps, AddNormForwardsMatchTheAddThenTheNorm) {
  for (auto [n, c] : {std::pair{37, 200}, std::pair{33, 96}, std::pair{64, 1032}, std::pair{20, 1030}}) {
    Tensor x = input({n, c}, 13, -2, 3), r = input({n, c}, 25, -1, 1), g = input({c}, 14), b = input({c}, 15);
    Tensor gres = up(r), gg = up(g), gb = up(b);
    Tensor sum = up(x), ry = poisoned({n, c}, dt), rm = poisoned({n}, F32), rr = poisoned({n}, F32);
    gpu->add_(sum, gres);
    gpu->layernorm_forward(ry, rm, rr, sum, gg, gb, 1e-5);
    Tensor gx = up(x), y = poisoned({n, c}, dt), m = poisoned({n}, F32), s = poisoned({n}, F32);
    gpu->add_layernorm_forward(y, m, s, gx, gres, gg, gb, 1e-5);
    expect_close(gx, down(sum), "add_layernorm sum", 1e-12);
    expect_close(y, down(ry), "add_layernorm y", 1e-12);
    expect_close(m, down(rm), "add_layernorm mean", 1e-12);
    expect_close(s, down(rr), "add_layernorm rstd", 1e-12);
    Tensor ry2 = poisoned({n, c}, dt), rr2 = poisoned({n}, F32);
    gpu->rmsnorm_forward(ry2, rr2, sum, gg, 1e-5);
    Tensor gx2 = up(x), y2 = poisoned({n, c}, dt), s2 = poisoned({n}, F32);
    gpu->add_rmsnorm_forward(y2, s2, gx2, gres, gg, 1e-5);
    expect_close(gx2, down(sum), "add_rmsnorm sum", 1e-12);
    expect_close(y2, down(ry2), "add_rmsnorm y", 1e-12);
    expect_close(s2, down(rr2), "add_rmsnorm rstd", 1e-12);
  }
}

// Rows of 16-byte packs (200, 96; 1032: five rounds of a warp, the last in part) and of elements
// one by one (1030), as the kernels choose (packs16).
TEST_P(CudaOps, LayerNormBackwardAccumulatesEveryGradient) {
  for (auto [n, c] : {std::pair{37, 200}, std::pair{300, 96}, std::pair{64, 1032}, std::pair{20, 1030}}) {
    Tensor x = input({n, c}, 16, -2, 3), g = input({c}, 17), b = input({c}, 18), dy = input({n, c}, 19);
    Tensor ry = cpu_empty({n, c}), rm = cpu_empty({n}), rr = cpu_empty({n});
    cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
    Tensor dx0 = input({n, c}, 20), dg0 = uniform({c}, 21), db0 = uniform({c}, 22);
    Tensor rdx = dx0.clone(), rdg = dg0.clone(), rdb = db0.clone();
    cpu->layernorm_backward(rdx, rdg, rdb, dy, x, g, rm, rr);
    Tensor gdx = up(dx0), gdg = up(dg0, F32), gdb = up(db0, F32);
    Tensor gm = up(rm, F32), gr = up(rr, F32), gdy = up(dy), gx = up(x), gg = up(g);
    gpu->layernorm_backward(gdx, gdg, gdb, gdy, gx, gg, gm, gr);
    expect_close(gdx, rdx, "layernorm dx");
    expect_close(gdg, rdg, "layernorm dg");
    expect_close(gdb, rdb, "layernorm db");
    // dx = residual + d/dx (the residual stream's gradient, no copy): dx itself, poisoned, is not read.
    Tensor gres = up(dx0), gdx2 = poisoned({n, c}, dt), gdg2 = up(dg0, F32), gdb2 = up(db0, F32);
    gpu->layernorm_backward(gdx2, gdg2, gdb2, gdy, gx, gg, gm, gr, &gres);
    expect_close(gdx2, rdx, "layernorm dx from the residual grad");
    expect_close(gdg2, rdg, "layernorm dg beside the residual grad");
  }
}

TEST_P(CudaOps, GeluForwardAndBackwardMatchCpu) {
  Tensor x = input({37, 203}, 23, -4, 4), dy = input({37, 203}, 24);
  Tensor ry = cpu_empty(x.shape()), rdx = cpu_empty(x.shape());
  cpu->gelu_forward(ry, x);
  cpu->gelu_backward(rdx, x, dy);
  Tensor gx = up(x), gdy = up(dy), y = poisoned(x.shape(), dt), dx = poisoned(x.shape(), dt);
  gpu->gelu_forward(y, gx);
  gpu->gelu_backward(dx, gx, gdy);
  expect_close(y, ry, "gelu y");
  expect_close(dx, rdx, "gelu dx");
}

// fc and its GeLU, fused on the GPU where cuBLASLt's epilogues take the MLP width (a multiple of
// 8: GELU_AUX_BIAS forward, DGELU backward), the two ops otherwise (203): both as the CPU's
// linear_forward + gelu_forward and linear_backward + gelu_backward.
TEST_P(CudaOps, LinearGeluForwardAndBackwardMatchTheUnfusedOps) {
  const int64_t n = 37, h = 96;
  const DType acc = acc_dtype(dt);
  for (int64_t f : {200, 203}) {
    Tensor x = input({n, h}, 60), w = input({f, h}, 61), b = input({f}, 62);
    Tensor ry = cpu_empty({n, f}), rpre = cpu_empty({n, f});
    cpu->linear_gelu_forward(ry, rpre, x, w, b);
    Tensor y = poisoned({n, f}, dt), pre = poisoned({n, f}, dt);
    gpu->linear_gelu_forward(y, pre, up(x), up(w), up(b));
    expect_close(pre, rpre, "fc output (the gelu input)");
    expect_close(y, ry, "gelu output");
    // fc2 [h, f] after it: dpre = (dy w2) gelu'(pre); dw2 and db2 accumulate.
    Tensor w2 = input({h, f}, 63), dy = input({n, h}, 64), act = rounded(ry, dt), kept = rounded(rpre, dt);
    Tensor dw0 = uniform({h, f}, 65), db0 = uniform({h}, 66);
    Tensor rdpre = cpu_empty({n, f}), rdw = dw0.clone(), rdb = db0.clone();
    cpu->linear_gelu_backward(rdpre, rdw, &rdb, dy, act, w2, kept);
    Tensor gdpre = poisoned({n, f}, dt), gdw = up(dw0, acc), gdb = up(db0, acc);
    gpu->linear_gelu_backward(gdpre, gdw, &gdb, up(dy), up(act), up(w2), up(kept));
    expect_close(gdpre, rdpre, "gelu input grad");
    expect_close(gdw, rdw, "fc2 dw (accumulated in f32)");
    expect_close(gdb, rdb, "fc2 db (accumulated in f32)");
  }
}

struct AttnShape {
  int b, s, a, hd;
};
const AttnShape kAttnShapes[] = {{2, 7, 3, 16}, {1, 45, 2, 8}, {3, 33, 4, 24}};

TEST_P(CudaOps, AttentionForwardMatchesCpu) {
  for (const AttnShape& sh : kAttnShapes) {
    const int64_t n = int64_t(sh.b) * sh.s;
    Tensor qkv = input({n, 3 * sh.a * sh.hd}, 25);
    Tensor ry = cpu_empty({n, sh.a * sh.hd}), rp = cpu_empty({sh.b, sh.a, sh.s, sh.s});
    cpu->attention_forward(ry, rp, qkv, sh.b, sh.s, sh.a, sh.hd);
    Tensor gq = up(qkv), y = poisoned(ry.shape(), dt), p = poisoned(rp.shape(), dt);
    gpu->attention_forward(y, p, gq, sh.b, sh.s, sh.a, sh.hd);
    expect_close(p, rp, "attention probs");
    expect_close(y, ry, "attention y");
  }
}

TEST_P(CudaOps, AttentionBackwardMatchesCpu) {
  for (const AttnShape& sh : kAttnShapes) {
    const int64_t n = int64_t(sh.b) * sh.s;
    Tensor qkv = input({n, 3 * sh.a * sh.hd}, 26), dy = input({n, sh.a * sh.hd}, 27);
    Tensor ry = cpu_empty({n, sh.a * sh.hd}), rp = cpu_empty({sh.b, sh.a, sh.s, sh.s});
    cpu->attention_forward(ry, rp, qkv, sh.b, sh.s, sh.a, sh.hd);
    Tensor probs = rounded(rp, dt);  // both sides see the probs as stored in dt
    Tensor rdq = cpu_empty(qkv.shape());
    cpu->attention_backward(rdq, dy, qkv, probs, sh.b, sh.s, sh.a, sh.hd);
    Tensor gq = up(qkv), gdy = up(dy), gp = up(probs), dq = poisoned(qkv.shape(), dt);
    gpu->attention_backward(dq, gdy, gq, gp, sh.b, sh.s, sh.a, sh.hd);
    expect_close(dq, rdq, "attention dqkv");
  }
}

TEST_P(CudaOps, EmbeddingForwardLooksUpThisShardsRowsAndAddsPositions) {
  for (int64_t h : {96, 90}) {  // 16-byte packs, and elements one by one
    const int64_t rows = 50, vocab_start = 10;
    const int s = 7;
    const int64_t n = 3 * s;
    Tensor tok = tokens(n, 0, 80, 1);  // some below and above this shard's [10, 60)
    Tensor wte = input({rows, h}, 28), wpe = input({9, h}, 29);
    for (bool with_pos : {true, false}) {
      Tensor ref = cpu_empty({n, h});
      cpu->embedding_forward(ref, tok, wte, vocab_start, with_pos ? &wpe : nullptr, s);
      Tensor gt = up(tok), gw = up(wte), gp = up(wpe), x = poisoned({n, h}, dt);
      gpu->embedding_forward(x, gt, gw, vocab_start, with_pos ? &gp : nullptr, s);
      expect_close(x, ref, with_pos ? "embedding x" : "embedding x without positions");
    }
  }
}

TEST_P(CudaOps, EmbeddingBackwardScatterAddsIntoF32Grads) {
  for (int64_t h : {96, 90}) {  // 16-byte packs, and elements one by one
    const int64_t rows = 50, vocab_start = 10;
    const int s = 7;
    const int64_t n = 5 * s;
    Tensor tok = tokens(n, 5, 40, 2);  // repeats, and some outside the shard
    Tensor dx = input({n, h}, 30), dwte0 = uniform({rows, h}, 31), dwpe0 = uniform({9, h}, 32);
    Tensor rwte = dwte0.clone(), rwpe = dwpe0.clone();
    cpu->embedding_backward(rwte, &rwpe, dx, tok, vocab_start, s);
    Tensor gt = up(tok), gdx = up(dx), gwte = up(dwte0, F32), gwpe = up(dwpe0, F32);
    gpu->embedding_backward(gwte, &gwpe, gdx, gt, vocab_start, s);
    expect_close(gwte, rwte, "embedding dwte");
    expect_close(gwpe, rwpe, "embedding dwpe");
  }
}

// Rows of 16-byte packs with a tail of valid columns read one by one (136 wide, 130 valid), and of
// elements one by one (131 wide).
TEST_P(CudaOps, CrossEntropyPiecesMatchCpuAndIgnorePaddedColumns) {
  for (auto [v, v_valid] : {std::pair<int64_t, int64_t>{136, 130}, std::pair<int64_t, int64_t>{131, 129}}) {
    const int64_t n = 37, vocab_start = 100;
    Tensor logits = input({n, v}, 33, -4, 4);
    for (int64_t r = 0; r < n; ++r)  // padded columns hold large values that must be ignored
      for (int64_t j = v_valid; j < v; ++j) logits.data<float>()[r * v + j] = 1000.0f;
    Tensor tgt_tok = tokens(n, 50, 300, 3);
    Tensor rmax = cpu_empty({n}), rse = cpu_empty({n}), rtgt = cpu_empty({n}), rloss = cpu_empty({n});
    Tensor rdl = cpu_empty({n, v});
    cpu->xent_row_max(rmax, logits, v_valid);
    cpu->xent_sum_exp(rse, logits, rmax, v_valid);
    cpu->xent_target_logit(rtgt, logits, tgt_tok, vocab_start, v_valid);
    cpu->xent_loss(rloss, rmax, rse, rtgt);
    cpu->xent_backward(rdl, logits, rmax, rse, tgt_tok, vocab_start, v_valid, 1.0 / n);

    Tensor gl = up(logits), gt = up(tgt_tok);
    Tensor gmax = poisoned({n}, F32), gse = poisoned({n}, F32), gtgt = poisoned({n}, F32), gloss = poisoned({n}, F32);
    gpu->xent_row_max(gmax, gl, v_valid);
    expect_close(gmax, rmax, "xent max");
    Tensor cmax = up(rmax, F32);  // the next pieces get the CPU's inputs
    gpu->xent_sum_exp(gse, gl, cmax, v_valid);
    expect_close(gse, rse, "xent sum_exp");
    gpu->xent_target_logit(gtgt, gl, gt, vocab_start, v_valid);
    expect_close(gtgt, rtgt, "xent target logit");
    Tensor cse = up(rse, F32), ctgt = up(rtgt, F32);
    gpu->xent_loss(gloss, cmax, cse, ctgt);
    expect_close(gloss, rloss, "xent loss", 1e-5);
    Tensor gdl = poisoned({n, v}, dt);
    gpu->xent_backward(gdl, gl, cmax, cse, gt, vocab_start, v_valid, 1.0 / n);
    expect_close(gdl, rdl, "xent dlogits");
    Tensor h = down(gdl);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = v_valid; j < v; ++j) ASSERT_EQ(h.data<float>()[r * v + j], 0.0f) << "padded column " << j;
    // In place (the loss head writes the gradient over the logits), on both backends: the same values.
    gpu->xent_backward(gl, gl, cmax, cse, gt, vocab_start, v_valid, 1.0 / n);
    expect_close(gl, rdl, "xent dlogits in place");
    Tensor rl = logits.clone();
    cpu->xent_backward(rl, rl, rmax, rse, tgt_tok, vocab_start, v_valid, 1.0 / n);
    for (int64_t i = 0; i < n * v; ++i) ASSERT_EQ(rl.data<float>()[i], rdl.data<float>()[i]) << "cpu in place, " << i;
  }
}

// 37 x 201 elements one by one, 37 x 200 in 16-byte packs (packs16).
TEST_P(CudaOps, AddAddInPlaceAndScale) {
  for (int64_t c : {201, 200}) {
    Tensor a = input({37, c}, 34), b = input({37, c}, 35);
    Tensor rsum = cpu_empty(a.shape()), racc = a.clone();
    cpu->add(rsum, a, b);
    cpu->add_(racc, b);
    cpu->scale_(racc, -0.75);
    Tensor ga = up(a), gb = up(b), y = poisoned(a.shape(), dt);
    gpu->add(y, ga, gb);
    expect_close(y, rsum, "add");
    gpu->add_(ga, gb);
    gpu->scale_(ga, -0.75);
    expect_close(ga, racc, "add_ then scale_");
  }
}

TEST_P(CudaOps, SumAndSumSquaresInF64) {
  Tensor x = input({100003}, 36);
  Tensor gx = up(x);
  EXPECT_NEAR(gpu->sum(gx), cpu->sum(x), 1e-9 * std::abs(cpu->sum(x)) + 1e-9);
  EXPECT_NEAR(gpu->sum_squares(gx), cpu->sum_squares(x), 1e-9 * cpu->sum_squares(x));
  Tensor empty = gpu->empty({0}, dt);
  EXPECT_EQ(gpu->sum(empty), 0.0);
}

TEST_P(CudaOps, SumsPropagateInfAndNan) {
  Tensor x = input({5000}, 37);
  x.data<float>()[4321] = std::numeric_limits<float>::infinity();
  Tensor gx = up(x);
  EXPECT_TRUE(std::isinf(gpu->sum(gx)));
  EXPECT_TRUE(std::isinf(gpu->sum_squares(gx)));
  x.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  Tensor gn = up(x);
  EXPECT_TRUE(std::isnan(gpu->sum(gn)));
  EXPECT_TRUE(std::isnan(gpu->sum_squares(gn)));
}

TEST_P(CudaOps, CopyConvertsOnTheDeviceAndBothWaysToTheHost) {
  Tensor x = uniform({1001}, 38, -3, 3);
  Tensor want = rounded(x, dt);
  Tensor g = up(x, dt);  // host f32 -> device dt (converted on the host)
  for (DType other : {DType::F32, DType::BF16, DType::F16}) {
    Tensor o = poisoned({1001}, other);
    gpu->copy(o, g);  // device dt -> device other
    Tensor back = poisoned({1001}, dt);
    gpu->copy(back, o);
    // dt -> other -> dt is exact when other is at least as wide as dt
    if (other == DType::F32 || other == dt) expect_close(back, want, "device round trip", 1e-12);
  }
  Tensor host_dt = Tensor::empty({1001}, dt);
  gpu->copy(host_dt, g);  // device -> host, same dtype
  Tensor host_f32 = Tensor::empty({1001}, F32);
  host_f32.copy_from(host_dt);
  for (int64_t i = 0; i < 1001; ++i) ASSERT_EQ(host_f32.data<float>()[i], want.data<float>()[i]);
}

TEST_P(CudaOps, FillWritesEveryElement) {
  Tensor t = gpu->empty({3, 333}, dt);
  gpu->fill(t, 2.5);
  Tensor h = down(t);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.data<float>()[i], 2.5f);
  gpu->fill(t, 0.0);
  h = down(t);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.data<float>()[i], 0.0f);
}

// ---- LLaMA's operations ----
// rstd and dg are f32 on both sides, computed from the same (rounded) inputs: within 1e-5 in
// every dtype. The rest: 1e-5 in f32, 1e-2 in bf16 and f16 (the outputs are rounded to dt).

TEST_P(CudaOps, RmsNormForwardMatchesCpu) {
  for (auto [n, c] : {std::pair{37, 200}, std::pair{33, 96}, std::pair{9, 1001}, std::pair{64, 1032}}) {
    Tensor x = input({n, c}, 60, -2, 3), g = input({c}, 61);
    Tensor ry = cpu_empty({n, c}), rr = cpu_empty({n});
    cpu->rmsnorm_forward(ry, rr, x, g, 1e-5);
    Tensor y = poisoned({n, c}, dt), r = poisoned({n}, F32);
    Tensor gx = up(x), gg = up(g);
    gpu->rmsnorm_forward(y, r, gx, gg, 1e-5);
    expect_close(y, ry, "rmsnorm y");
    expect_close(r, rr, "rmsnorm rstd", 1e-5);
  }
}

// dx and dg accumulate into random values; 300 and 600 rows take two and three chunks of the
// column reduction.
TEST_P(CudaOps, RmsNormBackwardAccumulatesDxAndDg) {
  for (auto [n, c] : {std::pair{37, 200}, std::pair{300, 96}, std::pair{600, 45}, std::pair{64, 1032}}) {
    Tensor x = input({n, c}, 62, -2, 3), g = input({c}, 63), dy = input({n, c}, 64);
    Tensor ry = cpu_empty({n, c}), rr = cpu_empty({n});
    cpu->rmsnorm_forward(ry, rr, x, g, 1e-5);
    Tensor dx0 = input({n, c}, 65), dg0 = uniform({c}, 66);
    Tensor rdx = dx0.clone(), rdg = dg0.clone();
    cpu->rmsnorm_backward(rdx, rdg, dy, x, g, rr);
    Tensor gdx = up(dx0), gdg = up(dg0, F32), gr = up(rr, F32), gdy = up(dy), gx = up(x), gg = up(g);
    gpu->rmsnorm_backward(gdx, gdg, gdy, gx, gg, gr);
    expect_close(gdx, rdx, "rmsnorm dx");
    expect_close(gdg, rdg, "rmsnorm dg", 1e-5);
    Tensor gres = up(dx0), gdx2 = poisoned({n, c}, dt), gdg2 = up(dg0, F32);
    gpu->rmsnorm_backward(gdx2, gdg2, gdy, gx, gg, gr, &gres);
    expect_close(gdx2, rdx, "rmsnorm dx from the residual grad");
  }
}

struct RopeShape {
  int b, s, a, hd;
  double theta;
};
// Odd half head sizes (65), positions up to 299, LLaMA 3's base.
const RopeShape kRopeShapes[] = {{2, 7, 3, 16, 1e4}, {1, 45, 2, 8, 1e4}, {3, 33, 4, 24, 5e5}, {1, 300, 1, 130, 1e4}};

TEST_P(CudaOps, RopeAndItsInverseMatchCpuOutOfPlaceAndInPlace) {
  for (const RopeShape& sh : kRopeShapes) {
    const int64_t n = int64_t(sh.b) * sh.s;
    Tensor x = input({n, 3 * sh.a * sh.hd}, 67, -2, 2);
    for (bool inverse : {false, true}) {
      Tensor ref = cpu_empty(x.shape());
      cpu->rope(ref, x, sh.s, sh.a, sh.hd, sh.theta, inverse);
      Tensor gx = up(x), y = poisoned(x.shape(), dt);
      gpu->rope(y, gx, sh.s, sh.a, sh.hd, sh.theta, inverse);
      expect_close(y, ref, inverse ? "rope inverse" : "rope");
      gpu->rope(gx, gx, sh.s, sh.a, sh.hd, sh.theta, inverse);  // in place, as the LLaMA layer calls it
      expect_close(gx, ref, inverse ? "rope inverse in place" : "rope in place");
    }
    // the inverse undoes the rotation
    Tensor gx = up(x);
    gpu->rope(gx, gx, sh.s, sh.a, sh.hd, sh.theta, false);
    gpu->rope(gx, gx, sh.s, sh.a, sh.hd, sh.theta, true);
    expect_close(gx, x, "rope then its inverse");
  }
}

// 203 and 1 wide element by element, 64 and 2056 (two rounds of a block) in 16-byte packs.
TEST_P(CudaOps, SwigluForwardAndBackwardMatchCpu) {
  for (auto [n, f] : {std::pair{37, 203}, std::pair{5, 1}, std::pair{130, 64}, std::pair{20, 2056}}) {
    Tensor x = input({n, 2 * f}, 68, -6, 6), dy = input({n, f}, 69);
    Tensor ry = cpu_empty({n, f}), rdx = cpu_empty({n, 2 * f});
    cpu->swiglu_forward(ry, x);
    cpu->swiglu_backward(rdx, x, dy);
    Tensor gx = up(x), gdy = up(dy), y = poisoned({n, f}, dt), dx = poisoned({n, 2 * f}, dt);
    gpu->swiglu_forward(y, gx);
    gpu->swiglu_backward(dx, gx, gdy);
    expect_close(y, ry, "swiglu y");
    expect_close(dx, rdx, "swiglu dx");
  }
}

// Grouped-query attention's expand and its transpose: one group (MQA), groups of several heads,
// groups = heads (the identity layout), an odd head size, a single row.
TEST_P(CudaOps, GqaExpandAndReduceMatchCpu) {
  struct Shape3 {
    int64_t n;
    int a, g, hd;
  };
  // hd 16, 8 and 264 (two rounds of a warp) in 16-byte packs, 3 and 5 element by element.
  for (const Shape3 sh : {Shape3{37, 8, 2, 16}, {5, 6, 1, 3}, {12, 4, 4, 8}, {1, 12, 3, 5}, {3, 4, 2, 264}}) {
    const int64_t compact = int64_t(sh.a + 2 * sh.g) * sh.hd, heads = int64_t(3) * sh.a * sh.hd;
    Tensor x = input({sh.n, compact}, 70, -2, 2), dy = input({sh.n, heads}, 71, -2, 2);
    Tensor ry = cpu_empty({sh.n, heads}), rdx = cpu_empty({sh.n, compact});
    cpu->gqa_expand(ry, x, sh.a, sh.g, sh.hd);
    cpu->gqa_reduce(rdx, dy, sh.a, sh.g, sh.hd);
    Tensor gx = up(x), gdy = up(dy), y = poisoned({sh.n, heads}, dt), dx = poisoned({sh.n, compact}, dt);
    gpu->gqa_expand(y, gx, sh.a, sh.g, sh.hd);
    gpu->gqa_reduce(dx, gdy, sh.a, sh.g, sh.hd);
    expect_close(y, ry, "gqa_expand", 1e-12);  // a copy: exact in every dtype
    expect_close(dx, rdx, "gqa_reduce");
  }
}

// ---- Reductions over thousands of positive terms ----
// Every op accumulates in f32 whatever the storage (backend.h). A 16-bit running sum stops growing
// once its spacing exceeds a term (bf16: at 256 terms of about 1; f16: at 2048), which the tests
// above, with a few hundred signed terms within 1e-2, never reach. Here 4096-8192 terms in [0.5, 1)
// against the CPU's f32 sums of the same rounded inputs within 1e-4: a column reduction whose
// per-thread partial sums were rounded to bf16 after every term missed by 1e-3 (its chunks keep
// the partial sums short), one summing in 16 bits throughout by tens of percent.
constexpr int64_t kTerms = 4096;  // 16 x bf16's stall point, 2 x f16's
constexpr double kLongTol = 1e-4;

Tensor host_zeros(Shape shape) { return Tensor::zeros(std::move(shape), F32); }

// dw = dy^T x and db = column sums of dy over 4096 rows, into f32 gradients.
TEST_P(CudaOps, LongLinearGradientsAccumulateInF32) {
  Tensor x = input({kTerms, 4}, 80, 0.5, 1), dy = input({kTerms, 3}, 81, 0.5, 1), w = input({3, 4}, 82);
  Tensor rdw = host_zeros({3, 4}), rdb = host_zeros({3});
  cpu->linear_backward(nullptr, false, rdw, &rdb, dy, x, w);
  Tensor dw = up(host_zeros({3, 4}), F32), db = up(host_zeros({3}), F32);
  gpu->linear_backward(nullptr, false, dw, &db, up(dy), up(x), up(w));
  expect_close(dw, rdw, "linear dw over 4096 rows", kLongTol);
  expect_close(db, rdb, "linear db over 4096 rows", kLongTol);
}

// LayerNorm's bias gradient and RMSNorm's gain gradient (positive x, g and dy: every term
// dy * x * rstd is positive) sum over 4096 rows. LayerNorm's gain gradient has terms of both signs
// (x centred) and no stall point.
TEST_P(CudaOps, LongNormGradientsAccumulateInF32) {
  const int64_t c = 5;
  Tensor x = input({kTerms, c}, 83, 0.5, 1), g = input({c}, 84, 0.5, 1), b = input({c}, 85, 0.5, 1);
  Tensor dy = input({kTerms, c}, 86, 0.5, 1);
  Tensor ry = host_zeros({kTerms, c}), rm = host_zeros({kTerms}), rr = host_zeros({kTerms});
  cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
  Tensor rdx = host_zeros({kTerms, c}), rdg = host_zeros({c}), rdb = host_zeros({c});
  cpu->layernorm_backward(rdx, rdg, rdb, dy, x, g, rm, rr);
  Tensor dx = up(host_zeros({kTerms, c})), dg = up(host_zeros({c}), F32), db = up(host_zeros({c}), F32);
  gpu->layernorm_backward(dx, dg, db, up(dy), up(x), up(g), up(rm, F32), up(rr, F32));
  expect_close(db, rdb, "layernorm db over 4096 rows", kLongTol);

  Tensor rrs = host_zeros({kTerms}), rdx2 = host_zeros({kTerms, c}), rdg2 = host_zeros({c});
  cpu->rmsnorm_forward(ry, rrs, x, g, 1e-5);
  cpu->rmsnorm_backward(rdx2, rdg2, dy, x, g, rrs);
  Tensor dx2 = up(host_zeros({kTerms, c})), dg2 = up(host_zeros({c}), F32);
  gpu->rmsnorm_backward(dx2, dg2, up(dy), up(x), up(g), up(rrs, F32));
  expect_close(dg2, rdg2, "rmsnorm dg over 4096 rows", kLongTol);
}

// Mean and mean square over 8192 columns of one row.
TEST_P(CudaOps, LongNormStatisticsAccumulateInF32) {
  const int64_t c = 2 * kTerms;
  Tensor x = input({2, c}, 87, 0.5, 1), g = input({c}, 88, 0.5, 1), b = input({c}, 89, 0.5, 1);
  Tensor ry = host_zeros({2, c}), rm = host_zeros({2}), rr = host_zeros({2});
  cpu->layernorm_forward(ry, rm, rr, x, g, b, 1e-5);
  Tensor y = poisoned({2, c}, dt), m = poisoned({2}, F32), r = poisoned({2}, F32);
  gpu->layernorm_forward(y, m, r, up(x), up(g), up(b), 1e-5);
  expect_close(m, rm, "layernorm mean over 8192 columns", kLongTol);
  // rstd of values in [0.5, 1): a variance of about 1/48, from sums of squares near 0.58 c.
  expect_close(r, rr, "layernorm rstd over 8192 columns", 1e-3);
  Tensor rr2 = host_zeros({2}), y2 = poisoned({2, c}, dt), r2 = poisoned({2}, F32);
  cpu->rmsnorm_forward(ry, rr2, x, g, 1e-5);
  gpu->rmsnorm_forward(y2, r2, up(x), up(g), 1e-5);
  expect_close(r2, rr2, "rmsnorm rstd over 8192 columns", kLongTol);
}

// Every row the same token: its embedding gradient row sums 4096 rows of dx.
TEST_P(CudaOps, LongEmbeddingGradientAccumulatesInF32) {
  const int64_t h = 3, rows = 4;
  Tensor dx = input({kTerms, h}, 90, 0.5, 1), tok = tokens(kTerms, 2, 3, 91);  // every token 2
  Tensor rwte = host_zeros({rows, h});
  cpu->embedding_backward(rwte, nullptr, dx, tok, 0, kTerms);
  Tensor wte = up(host_zeros({rows, h}), F32);
  gpu->embedding_backward(wte, nullptr, up(dx), up(tok), 0, kTerms);
  expect_close(wte, rwte, "embedding dwte of a token repeated 4096 times", kLongTol);
}

// The softmax denominator of the loss over 8192 vocabulary columns.
TEST_P(CudaOps, LongCrossEntropySumAccumulatesInF32) {
  const int64_t v = 2 * kTerms;
  Tensor logits = input({2, v}, 92, 0.5, 1);
  Tensor rmax = host_zeros({2}), rse = host_zeros({2});
  cpu->xent_row_max(rmax, logits, v);
  cpu->xent_sum_exp(rse, logits, rmax, v);
  Tensor se = poisoned({2}, F32);
  gpu->xent_sum_exp(se, up(logits), up(rmax, F32), v);
  expect_close(se, rse, "xent sum_exp over 8192 columns", kLongTol);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaOps, ::testing::Values(DType::F32, DType::BF16, DType::F16), dtype_param_name);

TEST(CudaBackend, AdamWMatchesCpu) {
  PTDP_SKIP_WITHOUT_GPU();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  const int64_t n = 1001;
  Tensor p = uniform({n}, 40), m = uniform({n}, 41, 0, 0.1), v = uniform({n}, 42, 0, 0.01);
  Tensor gp = gpu->empty({n}, F32), gm = gpu->empty({n}, F32), gv = gpu->empty({n}, F32), gg = gpu->empty({n}, F32);
  gpu->copy(gp, p);
  gpu->copy(gm, m);
  gpu->copy(gv, v);
  for (int64_t step = 1; step <= 3; ++step) {
    Tensor g = uniform({n}, 43 + uint64_t(step));
    gpu->copy(gg, g);
    const AdamWParams ap{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = step};
    cpu->adamw(p, g, m, v, ap);
    gpu->adamw(gp, gg, gm, gv, ap);
  }
  for (auto [dev, ref] : {std::pair{&gp, &p}, std::pair{&gm, &m}, std::pair{&gv, &v}}) {
    Tensor h = Tensor::empty({n}, F32);
    gpu->copy(h, *dev);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(h.data<float>()[i], ref->data<float>()[i], 1e-5 * std::abs(ref->data<float>()[i]) + 1e-12) << i;
  }
}

TEST(CudaBackend, RefusesF64AndWrongDtypesWithAClearError) {
  PTDP_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  Tensor x = gpu->empty({4, 8}, DType::F64), y = gpu->empty({4, 8}, DType::F64);
  try {
    gpu->gelu_forward(y, x);
    FAIL() << "f64 accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("f32, bf16 or f16, not f64"), std::string::npos) << e.what();
  }
  // bf16 compute: the weight gradient must be f32
  Tensor xb = gpu->empty({4, 8}, DType::BF16), wb = gpu->empty({3, 8}, DType::BF16), dy = gpu->empty({4, 3}, DType::BF16);
  Tensor dw_wrong = gpu->empty({3, 8}, DType::BF16);
  try {
    gpu->linear_backward(nullptr, false, dw_wrong, nullptr, dy, xb, wb);
    FAIL() << "a bf16 weight gradient accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("linear weight grad is bf16, expected f32"), std::string::npos) << e.what();
  }
  Tensor host = Tensor::empty({4, 8}, DType::BF16);
  Tensor yb = gpu->empty({4, 8}, DType::BF16);
  EXPECT_THROW(gpu->gelu_forward(yb, host), RuntimeError);
}

// The norm kernels take __restrict__ pointers: an output overlapping an input is refused, not computed wrong.
TEST(CudaBackend, NormsRefuseAnOutputThatOverlapsAnInput) {
  PTDP_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  const int64_t n = 4, c = 8;
  Tensor both = gpu->empty({2 * n, c}, F32), g = gpu->empty({c}, F32), b = gpu->empty({c}, F32);
  Tensor mean = gpu->empty({n}, F32), rstd = gpu->empty({n}, F32), dg = gpu->empty({c}, F32), db = gpu->empty({c}, F32);
  Tensor x = both.view(0, {n, c}), shifted = both.view(c, {n, c});  // rows 1..n overlap rows 0..n-1
  auto expect_refused = [](auto&& call, const char* what) {
    try {
      call();
      FAIL() << what << ": an overlapping output accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { gpu->layernorm_forward(shifted, mean, rstd, x, g, b, 1e-5); }, "layernorm_forward");
  expect_refused([&] { gpu->layernorm_backward(x, dg, db, shifted, x, g, mean, rstd); }, "layernorm_backward dx = x");
  expect_refused([&] { gpu->layernorm_backward(shifted, dg, db, x, gpu->empty({n, c}, F32), g, mean, rstd); },
                 "layernorm_backward dx overlapping dy");
  expect_refused([&] { gpu->rmsnorm_forward(x, rstd, x, g, 1e-5); }, "rmsnorm_forward in place");
  expect_refused([&] { gpu->rmsnorm_backward(shifted, dg, x, gpu->empty({n, c}, F32), g, rstd); },
                 "rmsnorm_backward dx overlapping dy");
}

TEST(CudaBackend, LlamaOpsRefuseBadShapesAndDtypes) {
  PTDP_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  const auto refused = [](auto&& f, const char* text) {
    try {
      f();
      ADD_FAILURE() << "accepted, expected: " << text;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Tensor x = gpu->empty({4, 8}, DType::BF16), y = gpu->empty({4, 8}, DType::BF16), g = gpu->empty({8}, DType::BF16);
  Tensor rstd16 = gpu->empty({4}, DType::BF16), rstd = gpu->empty({4}, F32), dg = gpu->empty({8}, F32);
  refused([&] { gpu->rmsnorm_forward(y, rstd16, x, g, 1e-5); }, "rmsnorm rstd is bf16, expected f32");
  Tensor dg16 = gpu->empty({8}, DType::BF16);
  refused([&] { gpu->rmsnorm_backward(y, dg16, x, x, g, rstd); }, "rmsnorm weight grad is bf16, expected f32");
  Tensor qkv = gpu->empty({6, 2 * 3 * 5}, DType::BF16);
  refused([&] { gpu->rope(qkv, qkv, 3, 2, 5, 1e4, false); }, "hd must be even");
  refused([&] { gpu->rope(x, x, 4, 1, 2, 1e4, false); }, "rope: qkv must be [b*s, 3*a*hd]");
  Tensor odd = gpu->empty({4, 7}, DType::BF16), half = gpu->empty({4, 3}, DType::BF16);
  refused([&] { gpu->swiglu_forward(half, odd); }, "swiglu: input must be [n, 2f]");
  Tensor y3 = gpu->empty({4, 3}, DType::BF16);
  refused([&] { gpu->swiglu_forward(y3, x); }, "swiglu output has shape");
  Tensor x64 = gpu->empty({4, 8}, DType::F64), y64 = gpu->empty({4, 4}, DType::F64);
  refused([&] { gpu->swiglu_forward(y64, x64); }, "f32, bf16 or f16, not f64");
  Tensor compact = gpu->empty({4, (4 + 2 * 2) * 2}, DType::BF16), heads = gpu->empty({4, 3 * 4 * 2}, DType::BF16);
  refused([&] { gpu->gqa_expand(heads, compact, 4, 3, 2); }, "query groups must divide");
  refused([&] { gpu->gqa_expand(heads, compact, 4, 1, 2); }, "gqa: qkv must be [n, (a + 2g)*hd]");
  refused([&] { gpu->gqa_expand(compact, compact, 4, 2, 2); }, "gqa_expand output has shape");
  refused([&] { gpu->gqa_reduce(compact, compact, 4, 2, 2); }, "gqa_reduce input has shape");
}

TEST(CudaBackend, EachBackendHasItsOwnStream) {
  PTDP_SKIP_WITHOUT_GPU();
  auto a = make_cuda_backend(0), b = make_cuda_backend(0);
  EXPECT_NE(cuda_stream(*a), cuda_stream(*b));
  EXPECT_NE(cuda_stream(*a), nullptr);
  EXPECT_EQ(cuda_device(*a), 0);
  auto cpu = make_cpu_backend();
  EXPECT_THROW(cuda_stream(*cpu), RuntimeError);
}

// Thread ranks sharing one GPU, each with its own backend and stream, reusing cached memory.
TEST(CudaBackend, BackendsOnSeveralThreadsComputeTheSameResult) {
  PTDP_SKIP_WITHOUT_GPU();
  const int64_t n = 129, in = 256, out = 384;
  Tensor x = uniform({n, in}, 50), w = uniform({out, in}, 51);
  auto cpu = make_cpu_backend();
  Tensor ref = Tensor::empty({n, out}, F32);
  cpu->linear_forward(ref, x, w, nullptr);
  constexpr int kThreads = 4;
  std::vector<double> err(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto gpu = make_cuda_backend(0);
      double worst = 0;
      for (int it = 0; it < 20; ++it) {
        Tensor gx = gpu->empty({n, in}, F32), gw = gpu->empty({out, in}, F32), y = gpu->empty({n, out}, F32);
        gpu->copy(gx, x);
        gpu->copy(gw, w);
        gpu->fill(y, kNaN);
        gpu->linear_forward(y, gx, gw, nullptr);
        Tensor h = Tensor::empty({n, out}, F32);
        gpu->copy(h, y);
        for (int64_t i = 0; i < h.numel(); ++i) {
          const double d = std::abs(double(h.data<float>()[i]) - ref.data<float>()[i]);
          worst = std::isnan(d) ? INFINITY : std::max(worst, d);
        }
      }
      err[t] = worst;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_LT(err[t], 1e-4) << "thread " << t;
}

TEST(CudaGemm, CachesOnePlanPerShapeAndHandlesEmptyProducts) {
  PTDP_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  cuda::GemmRunner gemm(0, cuda_stream(*gpu));
  Tensor a = gpu->empty({64, 32}, F32), b = gpu->empty({64, 16}, F32), c = gpu->empty({32, 16}, F32);
  gpu->fill(a, 1.0);
  gpu->fill(b, 2.0);
  // c[32 x 16] = a^T b: column-major a is 32 x 64 (ld 32), b 64 x 16 (ld 64)
  const cuda::GemmShape h{.trans_a = false, .trans_b = false, .m = 32, .n = 16, .k = 64, .lda = 32, .ldb = 64,
                          .ldc = 32};
  gemm.run(h, 1.0f, a.raw(), b.raw(), 0.0f, c.raw());
  gemm.run(h, 1.0f, a.raw(), b.raw(), 0.0f, c.raw());
  EXPECT_EQ(gemm.cached_plans(), 1u);
  Tensor host = Tensor::empty({32, 16}, F32);
  gpu->copy(host, c);
  for (int64_t i = 0; i < host.numel(); ++i) ASSERT_EQ(host.data<float>()[i], 128.0f);
  const cuda::GemmShape k0{.m = 32, .n = 16, .k = 0, .lda = 32, .ldb = 1, .ldc = 32};
  gemm.run(k0, 1.0f, a.raw(), b.raw(), 0.0f, c.raw());  // D = 0
  gpu->copy(host, c);
  for (int64_t i = 0; i < host.numel(); ++i) ASSERT_EQ(host.data<float>()[i], 0.0f);
  EXPECT_EQ(gemm.fallbacks(), 0u);
}

// ---- checks that need no device ----

TEST(CudaBackendWithoutGpu, MakingOneThrowsWithTheReason) {
  std::string reason;
  if (cuda::device_count(&reason) > 0) GTEST_SKIP() << "a GPU is present";
  try {
    make_cuda_backend(0);
    FAIL() << "no exception";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(CudaErrors, AFailedCudaCallThrowsNamingTheCallAndTheError) {
  try {
    PTDP_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL() << "no exception";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaSetDevice(1 << 20) failed"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_backend_test.cpp"), std::string::npos) << what;
  }
  // With a working driver the (non-sticky) error does not linger; without one every call fails.
  if (cuda::device_count() > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

TEST(CudaErrors, AFailedCublasCallThrowsNamingTheCallAndTheStatus) {
  const auto refuse = [] { return CUBLAS_STATUS_NOT_SUPPORTED; };
  try {
    PTDP_CUBLAS_CHECK(refuse());
    FAIL() << "no exception";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("refuse() failed"), std::string::npos) << what;
    EXPECT_NE(what.find("cublas status"), std::string::npos) << what;
  }
}

TEST(CudaTensor, DeviceTensorsRefuseHostOperations) {
  Tensor t = Tensor::wrap(reinterpret_cast<void*>(uintptr_t(4096)), {4}, F32, Device::CUDA);
  Tensor h = Tensor::empty({4}, F32);
  EXPECT_THROW(t.zero_(), RuntimeError);
  EXPECT_THROW(t.clone(), RuntimeError);
  EXPECT_THROW(t.copy_from(h), RuntimeError);
  EXPECT_THROW(h.copy_from(t), RuntimeError);
}

}  // namespace
}  // namespace ptdp
#endif
