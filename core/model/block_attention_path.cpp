#include "core/model/block_attention_path.h"

#include "core/backend/nvtx.h"

namespace ptdp {

namespace {

void run_core(Backend& be, const LayerDims& d, LayerCache& c) {
  NvtxRange r("block attention");
  c.atty = be.empty({d.rows(), int64_t(d.heads) * d.hd}, c.q.dtype());
  c.attn = CpAttnCache{};
  cp_attention_forward(be, d.cp, c.q, c.k, c.v, c.atty, c.attn, d.b, d.s, d.heads, d.kv_heads(), d.hd);
}

}  // namespace

void block_attention_forward(Backend& be, const LayerDims& d, LayerCache& c) {
  const int64_t n = d.rows();
  const DType dt = c.qkv.dtype();
  c.q = be.empty({n, int64_t(d.heads) * d.hd}, dt);
  c.k = be.empty({n, int64_t(d.kv_heads()) * d.hd}, dt);
  c.v = be.empty({n, int64_t(d.kv_heads()) * d.hd}, dt);
  be.qkv_split(c.q, c.k, c.v, c.qkv, d.heads, d.kv_heads(), d.hd);
  c.qkv = Tensor();
  if (d.llama) {  // rotary embedding at each row's position in its sequence
    be.rope_rows(c.q, c.q, d.positions, d.heads, d.hd, d.rope_theta, false);
    be.rope_rows(c.k, c.k, d.positions, d.kv_heads(), d.hd, d.rope_theta, false);
  }
  run_core(be, d, c);
}

void block_attention_drop_core(LayerCache& c) {
  c.atty = Tensor();
  c.attn = CpAttnCache{};
}

void block_attention_recompute(Backend& be, const LayerDims& d, LayerCache& c) { run_core(be, d, c); }

Tensor block_attention_backward(Backend& be, const LayerDims& d, const LayerCache& c, const Tensor& datty) {
  const DType dt = datty.dtype();
  Tensor dq = be.empty(c.q.shape(), dt), dk = be.empty(c.k.shape(), dt), dv = be.empty(c.v.shape(), dt);  // overwritten
  {
    NvtxRange r("block attention backward");
    cp_attention_backward(be, d.cp, datty, c.q, c.k, c.v, c.attn, dq, dk, dv, d.b, d.s, d.heads, d.kv_heads(), d.hd);
  }
  if (d.llama) {  // the rotation's transpose
    be.rope_rows(dq, dq, d.positions, d.heads, d.hd, d.rope_theta, true);
    be.rope_rows(dk, dk, d.positions, d.kv_heads(), d.hd, d.rope_theta, true);
  }
  Tensor dqkv = be.empty({d.rows(), d.qkv_cols()}, dt);
  be.qkv_join(dqkv, dq, dk, dv, d.heads, d.kv_heads(), d.hd);
  return dqkv;
}

}  // namespace ptdp
