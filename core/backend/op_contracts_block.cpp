// The contracts of the block-attention ops (flash attention's form, context parallelism's ring),
// qkv_split/join and rope_rows, stated once for every backend (backend.h's rules).
#include "core/backend/backend.h"
#include "core/backend/op_check.h"

namespace ptdp {

namespace {

void check_block_sizes(const char* op, int b, int sq, int sk, int a, int g, int hd) {
  PTDP_CHECK(b >= 0 && sq > 0 && sk > 0 && a > 0 && g > 0 && hd > 0 && a % g == 0,
             "{}: bad sizes b={} sq={} sk={} a={} g={} hd={} (g must divide a)", op, b, sq, sk, a, g, hd);
}

void check_qkv_sizes(const char* op, const Tensor& qkv, int a, int g, int hd) {
  PTDP_CHECK(a > 0 && g > 0 && hd > 0 && a % g == 0, "{}: {} query groups must divide {} heads (head size {})", op,
             g, a, hd);
  PTDP_CHECK(qkv.ndim() == 2 && qkv.dim(1) == int64_t(a + 2 * g) * hd,
             "{}: qkv must be [n, (a + 2g)*hd] = [n, {}], got {}", op, int64_t(a + 2 * g) * hd,
             shape_str(qkv.shape()));
}

}  // namespace

void Backend::flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                      int b, int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                      bool causal) {
  const OpCheck c(*this, "flash_attention_forward");
  const DType dt = c.compute_dtype(q);
  check_block_sizes(c.op(), b, sq, sk, a, g, hd);
  c.expect(q, "attention q", {int64_t(b) * sq, int64_t(a) * hd}, dt);
  c.expect(k, "attention k", {int64_t(b) * sk, int64_t(g) * hd}, dt);
  c.expect(v, "attention v", {int64_t(b) * sk, int64_t(g) * hd}, dt);
  c.expect(y, "attention output", {int64_t(b) * sq, int64_t(a) * hd}, dt);
  c.expect(lse, "attention lse", {b, a, sq}, acc_dtype(dt));
  c.expect_apart(y, q, "output", "q");
  do_flash_attention_forward(y, lse, q, k, v, b, sq, sk, a, g, hd, q_pos, k_pos, causal);
}

void Backend::flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                       const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b,
                                       int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                       bool causal, bool accumulate) {
  const OpCheck c(*this, "flash_attention_backward");
  const DType dt = c.compute_dtype(q);
  check_block_sizes(c.op(), b, sq, sk, a, g, hd);
  const int64_t nq = int64_t(b) * sq, nk = int64_t(b) * sk;
  c.expect(q, "attention q", {nq, int64_t(a) * hd}, dt);
  c.expect(k, "attention k", {nk, int64_t(g) * hd}, dt);
  c.expect(v, "attention v", {nk, int64_t(g) * hd}, dt);
  c.expect(y, "attention output", {nq, int64_t(a) * hd}, dt);
  c.expect(dy, "attention output grad", {nq, int64_t(a) * hd}, dt);
  c.expect(lse, "attention lse", {b, a, sq}, acc_dtype(dt));
  c.expect(dq, "attention q grad", {nq, int64_t(a) * hd}, dt);
  c.expect(dk, "attention k grad", {nk, int64_t(g) * hd}, dt);
  c.expect(dv, "attention v grad", {nk, int64_t(g) * hd}, dt);
  if (!accumulate) {
    if (do_flash_attention_backward_overwrite(dq, dk, dv, dy, q, k, v, y, lse, b, sq, sk, a, g, hd, q_pos, k_pos,
                                              causal))
      return;
    for (Tensor* t : {&dq, &dk, &dv}) fill(*t, 0);
  }
  do_flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, sq, sk, a, g, hd, q_pos, k_pos, causal);
}

void Backend::attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a,
                              int hd) {
  const OpCheck c(*this, "attention_merge");
  const DType dt = c.compute_dtype(y);
  check_block_sizes(c.op(), b, sq, 1, a, 1, hd);
  c.expect(y, "merged output", {int64_t(b) * sq, int64_t(a) * hd}, dt);
  c.expect(y2, "block output", {int64_t(b) * sq, int64_t(a) * hd}, dt);
  c.expect(lse, "merged lse", {b, a, sq}, acc_dtype(dt));
  c.expect(lse2, "block lse", {b, a, sq}, acc_dtype(dt));
  do_attention_merge(y, lse, y2, lse2, b, sq, a, hd);
}

void Backend::qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd) {
  const OpCheck c(*this, "qkv_split");
  const DType dt = c.compute_dtype(qkv);
  check_qkv_sizes(c.op(), qkv, a, g, hd);
  const int64_t n = qkv.dim(0);
  c.expect(qkv, "qkv", qkv.shape(), dt);
  c.expect(q, "q", {n, int64_t(a) * hd}, dt);
  c.expect(k, "k", {n, int64_t(g) * hd}, dt);
  c.expect(v, "v", {n, int64_t(g) * hd}, dt);
  do_qkv_split(q, k, v, qkv, a, g, hd);
}

void Backend::qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g, int hd) {
  const OpCheck c(*this, "qkv_join");
  const DType dt = c.compute_dtype(dqkv);
  check_qkv_sizes(c.op(), dqkv, a, g, hd);
  const int64_t n = dqkv.dim(0);
  c.expect(dqkv, "qkv grad", dqkv.shape(), dt);
  c.expect(dq, "q grad", {n, int64_t(a) * hd}, dt);
  c.expect(dk, "k grad", {n, int64_t(g) * hd}, dt);
  c.expect(dv, "v grad", {n, int64_t(g) * hd}, dt);
  do_qkv_join(dqkv, dq, dk, dv, a, g, hd);
}

void Backend::rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta,
                        bool inverse) {
  const OpCheck c(*this, "rope_rows");
  const DType dt = c.compute_dtype(x);
  PTDP_CHECK(heads > 0 && hd > 0 && hd % 2 == 0 && theta > 0,
             "rope_rows: bad sizes heads={} hd={} theta={} (hd must be even)", heads, hd, theta);
  PTDP_CHECK(x.ndim() == 2 && x.dim(1) == int64_t(heads) * hd, "rope_rows: x must be [n, heads*hd] = [n, {}], got {}",
             int64_t(heads) * hd, shape_str(x.shape()));
  c.expect(x, "rope_rows input", x.shape(), dt);
  c.expect(y, "rope_rows output", x.shape(), dt);
  c.expect(positions, "rope_rows positions", {x.dim(0)}, DType::I32);
  do_rope_rows(y, x, positions, heads, hd, theta, inverse);
}

}  // namespace ptdp
