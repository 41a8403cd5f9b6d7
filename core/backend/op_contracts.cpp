// Each op's contract, stated once for every backend: the public Backend ops check their arguments
// (devices, dtypes, shapes, sizes: backend.h's rules) and then call the backend's implementation.
#include "core/backend/backend.h"
#include "core/backend/op_check.h"

namespace ptdp {

namespace {

constexpr DType F32 = DType::F32, I32 = DType::I32;

// The compute dtype and sizes of a linear layer, x [n, in] and w [out, in] checked.
struct LinearDims {
  DType dt;
  int64_t n, in, out;
};
LinearDims linear_dims(const OpCheck& c, const Tensor& x, const Tensor& w) {
  const DType dt = c.compute_dtype(x);
  c.expect_2d(x, "linear input");
  c.expect_2d(w, "linear weight");
  const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  c.expect(x, "linear input", {n, in}, dt);
  c.expect(w, "linear weight", {out, in}, dt);
  return {dt, n, in, out};
}

// The compute dtype and sizes [n, c] of a normalisation's input x.
struct RowDims {
  DType dt;
  int64_t n, c;
};
RowDims norm_dims(const OpCheck& c, const Tensor& x, const char* what) {
  const DType dt = c.compute_dtype(x);
  c.expect_2d(x, what);
  const int64_t n = x.dim(0), cols = x.dim(1);
  c.expect(x, what, {n, cols}, dt);
  return {dt, n, cols};
}

// A LayerNorm forward's operands (x [n, c]; y like it and apart from it; mean, rstd [n]; g, b [c]),
// for layernorm_forward and add_layernorm_forward.
RowDims layernorm_forward_operands(const OpCheck& c, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& x, const Tensor& g, const Tensor& b) {
  const RowDims r = norm_dims(c, x, "layernorm input");
  c.expect(y, "layernorm output", {r.n, r.c}, r.dt);
  c.expect(mean, "layernorm mean", {r.n}, acc_dtype(r.dt));
  c.expect(rstd, "layernorm rstd", {r.n}, acc_dtype(r.dt));
  c.expect(g, "layernorm weight", {r.c}, r.dt);
  c.expect(b, "layernorm bias", {r.c}, r.dt);
  c.expect_apart(y, x, "the output", "the input");
  return r;
}

// An RMSNorm forward's operands (x [n, c]; y like it and apart from it; rstd [n]; g [c]).
RowDims rmsnorm_forward_operands(const OpCheck& c, const Tensor& y, const Tensor& rstd, const Tensor& x,
                                 const Tensor& g) {
  const RowDims r = norm_dims(c, x, "rmsnorm input");
  c.expect(y, "rmsnorm output", {r.n, r.c}, r.dt);
  c.expect(rstd, "rmsnorm rstd", {r.n}, acc_dtype(r.dt));
  c.expect(g, "rmsnorm weight", {r.c}, r.dt);
  c.expect_apart(y, x, "the output", "the input");
  return r;
}

// The residual a fused add takes into x (add_layernorm_forward, add_rmsnorm_forward): x's shape and
// dtype, apart from x and from the norm's output y.
void residual_operand(const OpCheck& c, const RowDims& r, const Tensor& res, const Tensor& x, const Tensor& y) {
  c.expect(res, "residual", {r.n, r.c}, r.dt);
  c.expect_apart(x, res, "the input", "the residual");
  c.expect_apart(y, res, "the output", "the residual");
}

// A norm backward's residual gradient, when given: [n, c] of the compute dtype, apart from dx
// (dx = residual + d/dx writes dx while reading it).
void residual_grad(const OpCheck& c, const Tensor& dx, const Tensor* residual, int64_t n, int64_t cols, DType dt) {
  if (!residual) return;
  c.expect(*residual, "residual grad", {n, cols}, dt);
  c.expect_apart(dx, *residual, "the input grad", "the residual grad");
}

// The compute dtype of cross-entropy's logits [n, v], with v_valid in [0, v].
DType logits_dtype(const OpCheck& c, const Tensor& logits, int64_t v_valid) {
  const DType dt = c.compute_dtype(logits);
  c.expect_2d(logits, "logits");
  c.expect(logits, "logits", logits.shape(), dt);
  PTDP_CHECK(v_valid >= 0 && v_valid <= logits.dim(1), "{}: v_valid {} outside [0, {}]", c.op(), v_valid,
             logits.dim(1));
  return dt;
}

void check_attention_sizes(int b, int s, int a, int hd) {
  PTDP_CHECK(b >= 0 && s > 0 && a > 0 && hd > 0, "attention: bad sizes b={} s={} a={} hd={}", b, s, a, hd);
}

// The compact grouped-query QKV [n, g*(a/g + 2)*hd].
void check_gqa(const Tensor& qkv, int a, int g, int hd) {
  PTDP_CHECK(a > 0 && g > 0 && hd > 0 && a % g == 0, "gqa: {} query groups must divide {} heads (head size {})",
             g, a, hd);
  PTDP_CHECK(qkv.ndim() == 2 && qkv.dim(1) == int64_t(a + 2 * g) * hd,
             "gqa: qkv must be [n, (a + 2g)*hd] = [n, {}], got {}", int64_t(a + 2 * g) * hd, shape_str(qkv.shape()));
}

// A swiglu input x [n, 2f]: f.
int64_t swiglu_half(const Tensor& x) {
  PTDP_CHECK(x.ndim() == 2 && x.dim(1) % 2 == 0, "swiglu: input must be [n, 2f], got {}", shape_str(x.shape()));
  return x.dim(1) / 2;
}

// A position embedding (or its gradient) `p` [>= s, h] of dtype dt.
void check_positions(const OpCheck& c, const Tensor& p, const char* what, int s, int64_t h, DType dt) {
  c.expect_2d(p, what);
  PTDP_CHECK(p.dim(0) >= s && p.dim(1) == h, "{} {} too small for s={} h={}", what, shape_str(p.shape()), s, h);
  c.expect(p, what, p.shape(), dt);
}

}  // namespace

void Backend::fill(Tensor& x, double value) {
  OpCheck(*this, "fill").expect(x, "fill target", x.shape(), x.dtype());
  do_fill(x, value);
}

void Backend::copy(Tensor& dst, const Tensor& src) {
  PTDP_CHECK(dst.numel() == src.numel(), "copy: {} elements into {}", src.numel(), dst.numel());
  do_copy(dst, src);
}

void Backend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) {
  const OpCheck c(*this, "linear_forward");
  const auto [dt, n, in, out] = linear_dims(c, x, w);
  c.expect(y, "linear output", {n, out}, dt);
  if (b) c.expect(*b, "linear bias", {out}, dt);
  do_linear_forward(y, x, w, b);
}

void Backend::linear_backward(Tensor* dx, bool accumulate_dx, Tensor& dw, Tensor* db, const Tensor& dy,
                              const Tensor& x, const Tensor& w) {
  const OpCheck c(*this, "linear_backward");
  const auto [dt, n, in, out] = linear_dims(c, x, w);
  c.expect(dy, "linear output grad", {n, out}, dt);
  c.expect(dw, "linear weight grad", {out, in}, acc_dtype(dt));
  if (dx) c.expect(*dx, "linear input grad", {n, in}, dt);
  if (db) c.expect(*db, "linear bias grad", {out}, acc_dtype(dt));
  do_linear_backward(dx, accumulate_dx, dw, db, dy, x, w);
}

void Backend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g,
                                const Tensor& b, double eps) {
  const OpCheck c(*this, "layernorm_forward");
  layernorm_forward_operands(c, y, mean, rstd, x, g, b);
  do_layernorm_forward(y, mean, rstd, x, g, b, eps);
}

void Backend::add_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, Tensor& x, const Tensor& r,
                                    const Tensor& g, const Tensor& b, double eps) {
  const OpCheck c(*this, "add_layernorm_forward");
  residual_operand(c, layernorm_forward_operands(c, y, mean, rstd, x, g, b), r, x, y);
  do_add_layernorm_forward(y, mean, rstd, x, r, g, b, eps);
}

void Backend::layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x,
                                 const Tensor& g, const Tensor& mean, const Tensor& rstd, const Tensor* residual) {
  const OpCheck c(*this, "layernorm_backward");
  const auto [dt, n, cols] = norm_dims(c, x, "layernorm input");
  c.expect(dx, "layernorm input grad", {n, cols}, dt);
  c.expect(dy, "layernorm output grad", {n, cols}, dt);
  c.expect(g, "layernorm weight", {cols}, dt);
  c.expect(dg, "layernorm weight grad", {cols}, acc_dtype(dt));
  c.expect(db, "layernorm bias grad", {cols}, acc_dtype(dt));
  c.expect(mean, "layernorm mean", {n}, acc_dtype(dt));
  c.expect(rstd, "layernorm rstd", {n}, acc_dtype(dt));
  c.expect_apart(dx, dy, "the input grad", "the output grad");
  c.expect_apart(dx, x, "the input grad", "the input");
  residual_grad(c, dx, residual, n, cols, dt);
  do_layernorm_backward(dx, dg, db, dy, x, g, mean, rstd, residual);
}

void Backend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps) {
  const OpCheck c(*this, "rmsnorm_forward");
  rmsnorm_forward_operands(c, y, rstd, x, g);
  do_rmsnorm_forward(y, rstd, x, g, eps);
}

void Backend::add_rmsnorm_forward(Tensor& y, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g, double eps) {
  const OpCheck c(*this, "add_rmsnorm_forward");
  residual_operand(c, rmsnorm_forward_operands(c, y, rstd, x, g), r, x, y);
  do_add_rmsnorm_forward(y, rstd, x, r, g, eps);
}

void Backend::rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                               const Tensor& rstd, const Tensor* residual) {
  const OpCheck c(*this, "rmsnorm_backward");
  const auto [dt, n, cols] = norm_dims(c, x, "rmsnorm input");
  c.expect(dx, "rmsnorm input grad", {n, cols}, dt);
  c.expect(dy, "rmsnorm output grad", {n, cols}, dt);
  c.expect(g, "rmsnorm weight", {cols}, dt);
  c.expect(dg, "rmsnorm weight grad", {cols}, acc_dtype(dt));
  c.expect(rstd, "rmsnorm rstd", {n}, acc_dtype(dt));
  c.expect_apart(dx, dy, "the input grad", "the output grad");
  c.expect_apart(dx, x, "the input grad", "the input");
  residual_grad(c, dx, residual, n, cols, dt);
  do_rmsnorm_backward(dx, dg, dy, x, g, rstd, residual);
}

void Backend::rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse) {
  const OpCheck c(*this, "rope");
  const DType dt = c.compute_dtype(x);
  PTDP_CHECK(s > 0 && a > 0 && hd > 0 && hd % 2 == 0 && theta > 0,
             "rope: bad sizes s={} a={} hd={} theta={} (hd must be even)", s, a, hd, theta);
  PTDP_CHECK(x.ndim() == 2 && x.dim(1) == int64_t(3) * a * hd && x.dim(0) % s == 0,
             "rope: qkv must be [b*s, 3*a*hd] with an even head size, got {} for s={} a={} hd={}",
             shape_str(x.shape()), s, a, hd);
  c.expect(x, "rope input", x.shape(), dt);
  c.expect(y, "rope output", x.shape(), dt);
  do_rope(y, x, s, a, hd, theta, inverse);
}

void Backend::swiglu_forward(Tensor& y, const Tensor& x) {
  const OpCheck c(*this, "swiglu_forward");
  const DType dt = c.compute_dtype(x);
  const int64_t f = swiglu_half(x);
  c.expect(x, "swiglu input", x.shape(), dt);
  c.expect(y, "swiglu output", {x.dim(0), f}, dt);
  do_swiglu_forward(y, x);
}

void Backend::swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) {
  const OpCheck c(*this, "swiglu_backward");
  const DType dt = c.compute_dtype(x);
  const int64_t f = swiglu_half(x);
  c.expect(x, "swiglu input", x.shape(), dt);
  c.expect(dx, "swiglu input grad", x.shape(), dt);
  c.expect(dy, "swiglu output grad", {x.dim(0), f}, dt);
  do_swiglu_backward(dx, x, dy);
}

void Backend::gelu_forward(Tensor& y, const Tensor& x) {
  const OpCheck c(*this, "gelu_forward");
  const DType dt = c.compute_dtype(x);
  c.expect(x, "gelu input", x.shape(), dt);
  c.expect(y, "gelu output", x.shape(), dt);
  do_gelu_forward(y, x);
}

void Backend::gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) {
  const OpCheck c(*this, "gelu_backward");
  const DType dt = c.compute_dtype(x);
  c.expect(x, "gelu input", x.shape(), dt);
  c.expect(dx, "gelu input grad", x.shape(), dt);
  c.expect(dy, "gelu output grad", x.shape(), dt);
  do_gelu_backward(dx, x, dy);
}

void Backend::linear_gelu_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) {
  const OpCheck c(*this, "linear_gelu_forward");
  const auto [dt, n, in, out] = linear_dims(c, x, w);
  c.expect(b, "linear bias", {out}, dt);
  c.expect(pre, "gelu input", {n, out}, dt);
  c.expect(y, "gelu output", {n, out}, dt);
  c.expect_apart(y, pre, "the gelu output", "the gelu input");
  do_linear_gelu_forward(y, pre, x, w, b);
}

void Backend::linear_gelu_backward(Tensor& dpre, Tensor& dw2, Tensor* db2, const Tensor& dy, const Tensor& y,
                                   const Tensor& w2, const Tensor& pre) {
  const OpCheck c(*this, "linear_gelu_backward");
  const auto [dt, n, in, out] = linear_dims(c, y, w2);
  c.expect(dy, "linear output grad", {n, out}, dt);
  c.expect(dw2, "linear weight grad", {out, in}, acc_dtype(dt));
  if (db2) c.expect(*db2, "linear bias grad", {out}, acc_dtype(dt));
  c.expect(pre, "gelu input", {n, in}, dt);
  c.expect(dpre, "gelu input grad", {n, in}, dt);
  c.expect_apart(dpre, pre, "the gelu input grad", "the gelu input");
  do_linear_gelu_backward(dpre, dw2, db2, dy, y, w2, pre);
}

void Backend::attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) {
  const OpCheck c(*this, "attention_forward");
  const DType dt = c.compute_dtype(qkv);
  check_attention_sizes(b, s, a, hd);
  const int64_t n = int64_t(b) * s;
  c.expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
  c.expect(y, "attention output", {n, int64_t(a) * hd}, dt);
  c.expect(probs, "attention probs", {b, a, s, s}, dt);
  do_attention_forward(y, probs, qkv, b, s, a, hd);
}

void Backend::attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b,
                                 int s, int a, int hd) {
  const OpCheck c(*this, "attention_backward");
  const DType dt = c.compute_dtype(qkv);
  check_attention_sizes(b, s, a, hd);
  const int64_t n = int64_t(b) * s;
  c.expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
  c.expect(dqkv, "attention qkv grad", {n, int64_t(3) * a * hd}, dt);
  c.expect(dy, "attention output grad", {n, int64_t(a) * hd}, dt);
  c.expect(probs, "attention probs", {b, a, s, s}, dt);
  do_attention_backward(dqkv, dy, qkv, probs, b, s, a, hd);
}

void Backend::gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd) {
  const OpCheck c(*this, "gqa_expand");
  const DType dt = c.compute_dtype(x);
  check_gqa(x, a, g, hd);
  c.expect(x, "gqa_expand input", x.shape(), dt);
  c.expect(y, "gqa_expand output", {x.dim(0), int64_t(3) * a * hd}, dt);
  c.expect_apart(y, x, "output", "input");
  do_gqa_expand(y, x, a, g, hd);
}

void Backend::gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd) {
  const OpCheck c(*this, "gqa_reduce");
  const DType dt = c.compute_dtype(dx);
  check_gqa(dx, a, g, hd);
  c.expect(dx, "gqa_reduce output", dx.shape(), dt);
  c.expect(dy, "gqa_reduce input", {dx.dim(0), int64_t(3) * a * hd}, dt);
  c.expect_apart(dx, dy, "output", "input");
  do_gqa_reduce(dx, dy, a, g, hd);
}

void Backend::embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start,
                                const Tensor* wpe, int s) {
  const OpCheck c(*this, "embedding_forward");
  const DType dt = c.compute_dtype(wte);
  c.expect_2d(wte, "word embedding");
  c.expect(wte, "word embedding", wte.shape(), dt);
  const int64_t n = tokens.numel(), h = wte.dim(1);
  c.expect(tokens, "tokens", tokens.shape(), I32);
  c.expect(x, "embedding output", {n, h}, dt);
  PTDP_CHECK(s > 0, "embedding: sequence length {} must be positive", s);
  if (wpe) check_positions(c, *wpe, "position embedding", s, h, dt);
  do_embedding_forward(x, tokens, wte, vocab_start, wpe, s);
}

void Backend::embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens,
                                 int64_t vocab_start, int s) {
  const OpCheck c(*this, "embedding_backward");
  const DType dt = c.compute_dtype(dx);
  c.expect_2d(dwte, "word embedding grad");
  const int64_t n = tokens.numel(), h = dwte.dim(1);
  c.expect(tokens, "tokens", tokens.shape(), I32);
  c.expect(dx, "embedding output grad", {n, h}, dt);
  c.expect(dwte, "word embedding grad", dwte.shape(), acc_dtype(dt));
  PTDP_CHECK(s > 0, "embedding: sequence length {} must be positive", s);
  if (dwpe) check_positions(c, *dwpe, "position embedding grad", s, h, acc_dtype(dt));
  do_embedding_backward(dwte, dwpe, dx, tokens, vocab_start, s);
}

void Backend::xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) {
  const OpCheck c(*this, "xent_row_max");
  const DType dt = logits_dtype(c, logits, v_valid);
  c.expect(max, "cross-entropy max", {logits.dim(0)}, acc_dtype(dt));
  do_xent_row_max(max, logits, v_valid);
}

void Backend::xent_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& max, int64_t v_valid) {
  const OpCheck c(*this, "xent_sum_exp");
  const DType dt = logits_dtype(c, logits, v_valid);
  c.expect(max, "cross-entropy max", {logits.dim(0)}, acc_dtype(dt));
  c.expect(sum_exp, "cross-entropy sum_exp", {logits.dim(0)}, acc_dtype(dt));
  do_xent_sum_exp(sum_exp, logits, max, v_valid);
}

void Backend::xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                int64_t v_valid) {
  const OpCheck c(*this, "xent_target_logit");
  const DType dt = logits_dtype(c, logits, v_valid);
  c.expect(targets, "targets", {logits.dim(0)}, I32);
  c.expect(tgt, "cross-entropy target logit", {logits.dim(0)}, acc_dtype(dt));
  do_xent_target_logit(tgt, logits, targets, vocab_start, v_valid);
}

void Backend::xent_loss(Tensor& loss, const Tensor& max, const Tensor& sum_exp, const Tensor& tgt) {
  const OpCheck c(*this, "xent_loss");
  const DType ga = c.compute_dtype(loss);
  PTDP_CHECK(ga == F32 || ga == DType::F64, "the loss is f32 or f64, not {}", dtype_name(ga));
  const int64_t n = loss.numel();
  c.expect(loss, "cross-entropy loss", {n}, ga);
  c.expect(max, "cross-entropy max", {n}, ga);
  c.expect(sum_exp, "cross-entropy sum_exp", {n}, ga);
  c.expect(tgt, "cross-entropy target logit", {n}, ga);
  do_xent_loss(loss, max, sum_exp, tgt);
}

void Backend::xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& sum_exp,
                            const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) {
  const OpCheck c(*this, "xent_backward");
  const DType dt = logits_dtype(c, logits, v_valid);
  const int64_t n = logits.dim(0);
  c.expect(dlogits, "logits grad", logits.shape(), dt);
  c.expect(max, "cross-entropy max", {n}, acc_dtype(dt));
  c.expect(sum_exp, "cross-entropy sum_exp", {n}, acc_dtype(dt));
  c.expect(targets, "targets", {n}, I32);
  do_xent_backward(dlogits, logits, max, sum_exp, targets, vocab_start, v_valid, scale);
}

void Backend::add(Tensor& y, const Tensor& a, const Tensor& b) {
  const OpCheck c(*this, "add");
  const DType dt = c.compute_dtype(y);
  c.expect(y, "add output", y.shape(), dt);
  c.expect(a, "add lhs", y.shape(), dt);
  c.expect(b, "add rhs", y.shape(), dt);
  do_add(y, a, b);
}

void Backend::add_(Tensor& y, const Tensor& x) {
  const OpCheck c(*this, "add_");
  const DType dt = c.compute_dtype(y);
  c.expect(y, "add_ target", y.shape(), dt);
  c.expect(x, "add_ operand", x.shape(), dt);
  PTDP_CHECK(x.numel() == y.numel(), "add_: {} elements into {}", x.numel(), y.numel());
  do_add_(y, x);
}

void Backend::scale_(Tensor& y, double alpha) {
  const OpCheck c(*this, "scale_");
  c.expect(y, "scale_ target", y.shape(), c.compute_dtype(y));
  do_scale_(y, alpha);
}

double Backend::sum(const Tensor& x) {
  const OpCheck c(*this, "sum");
  c.expect(x, "sum", x.shape(), c.compute_dtype(x));
  return do_sum(x);
}

double Backend::sum_squares(const Tensor& x) {
  const OpCheck c(*this, "sum_squares");
  c.expect(x, "sum_squares", x.shape(), c.compute_dtype(x));
  return do_sum_squares(x);
}

void Backend::adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) {
  const OpCheck c(*this, "adamw");
  const int64_t n = param.numel();
  c.expect(param, "adamw param", {n}, F32);
  c.expect(grad, "adamw grad", {n}, F32);
  c.expect(m, "adamw m", {n}, F32);
  c.expect(v, "adamw v", {n}, F32);
  do_adamw(param, grad, m, v, p);
}

}  // namespace ptdp
