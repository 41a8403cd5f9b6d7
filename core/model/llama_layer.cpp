// The LLaMA layer, forward and hand-written backward (see layer.h).
#include "core/backend/nvtx.h"
#include "core/model/block_attention_path.h"
#include "core/model/layer.h"

namespace ptdp {

void llama_forward_all(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                       LayerCache& c) {
  const int64_t n = d.rows(), nl = d.local_rows();  // nl: this rank's rows (n/t with sp)
  const DType dt = x.dtype();
  c.x = x;
  c.ln1 = be.empty({nl, d.h}, dt);
  c.rstd1 = be.empty({nl}, acc_dtype(dt));
  be.rmsnorm_forward(c.ln1, c.rstd1, x, w.ln1_w, d.eps);
  c.qkv = be.empty({n, d.qkv_cols()}, dt);
  be.linear_forward(c.qkv, sp_gather(be, d, c.ln1), w.qkv_w, nullptr);  // sp: g-bar all-gather
  // q and k of each head rotated: in place (kept rotated), or with grouped-query attention in the
  // expanded copy attention reads (the compact qkv is kept as projected).
  // Block attention rotates its split q and k at their positions (block_attention_path.h).
  if (d.block) {
    block_attention_forward(be, d, c);
  } else {
    if (!d.gqa()) be.rope(c.qkv, c.qkv, d.s, d.heads, d.hd, d.rope_theta, false);
    c.probs = be.empty({d.b, d.heads, d.s, d.s}, dt);
    c.atty = be.empty({n, int64_t(d.heads) * d.hd}, dt);
    be.attention_forward(c.atty, c.probs, attention_qkv(be, d, c.qkv), d.b, d.s, d.heads, d.hd);
  }
  c.x2 = be.empty({nl, d.h}, dt);
  Tensor part = partial_rows(be, d, c.x2);
  be.linear_forward(part, c.atty, w.proj_w, nullptr);
  reduce_rows(d, part, c.x2);  // g (sp: reduce-scatter)
  c.ln2 = be.empty({nl, d.h}, dt);
  c.rstd2 = be.empty({nl}, acc_dtype(dt));
  be.add_rmsnorm_forward(c.ln2, c.rstd2, c.x2, x, w.ln2_w, d.eps);  // the residual, then the norm
  c.fc = be.empty({n, int64_t(2) * d.ffn}, dt);
  be.linear_forward(c.fc, sp_gather(be, d, c.ln2), w.fc_w, nullptr);  // gate | up in one GEMM
  c.act = be.empty({n, d.ffn}, dt);
  be.swiglu_forward(c.act, c.fc);
  part = partial_rows(be, d, y);
  be.linear_forward(part, c.act, w.fc2_w, nullptr);
  reduce_rows(d, part, y);  // g
  be.add_(y, c.x2);         // residual
}

void llama_backward(Backend& be, const LayerDims& d, const LayerWeights& w, LayerWeights& g, LayerCache& c,
                    const Tensor& dy, Tensor& dx) {
  const int64_t n = d.rows(), nl = d.local_rows();
  const DType dt = dy.dtype();
  // MLP: y = x2 + down(swiglu(gate|up(rmsnorm(x2))))
  // Each tensor released once its last reader has been queued, as in layer_backward.
  Tensor dact = be.empty({n, d.ffn}, dt);
  be.linear_backward(&dact, false, g.fc2_w, nullptr, sp_gather(be, d, dy), c.act, w.fc2_w);
  c.act = Tensor();
  Tensor dfc = be.empty({n, int64_t(2) * d.ffn}, dt);
  be.swiglu_backward(dfc, c.fc, dact);
  dact = c.fc = Tensor();
  Tensor dln = be.empty({nl, d.h}, dt);
  Tensor part = partial_rows(be, d, dln);
  be.linear_backward(&part, false, g.fc_w, nullptr, dfc, sp_gather(be, d, c.ln2), w.fc_w);
  dfc = c.ln2 = Tensor();
  reduce_rows(d, part, dln);  // f (sp: reduce-scatter)
  Tensor dx2 = be.empty({nl, d.h}, dt);  // the residual stream's gradient dy, plus the norm's
  be.rmsnorm_backward(dx2, g.ln2_w, dln, c.x2, w.ln2_w, c.rstd2, &dy);
  c.x2 = c.rstd2 = Tensor();
  // Attention: x2 = x + proj(attn(rope(qkv(rmsnorm(x)))))
  Tensor datty = be.empty({n, int64_t(d.heads) * d.hd}, dt);
  be.linear_backward(&datty, false, g.proj_w, nullptr, sp_gather(be, d, dx2), c.atty, w.proj_w);
  const Tensor dqkv = attention_grad(be, d, c, datty);  // LLaMA: after the rotation's transpose
  release_attention(c);
  datty = Tensor();
  be.linear_backward(&part, false, g.qkv_w, nullptr, dqkv, sp_gather(be, d, c.ln1), w.qkv_w);
  reduce_rows(d, part, dln);  // f
  be.rmsnorm_backward(dx, g.ln1_w, dln, c.x, w.ln1_w, c.rstd1, &dx2);
}

}  // namespace ptdp
