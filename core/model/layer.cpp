#include "core/model/layer.h"

#include "core/backend/nvtx.h"
#include "core/common/error.h"
#include "core/model/block_attention_path.h"

namespace ptdp {

LayerWeights LayerWeights::view(const Tensor& flat, const ParamLayout& layout, int layer, int64_t base) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  auto v = [&](const char* n) {
    const ParamEntry& e = layout.at(p + n);
    return flat.view(e.offset - base, e.shape);
  };
  if (layout.arch() == Arch::Llama) {  // fc: gate and up, adjacent, as one [2f, h] matrix
    const ParamEntry& gate = layout.at(p + "gate.weight");
    const Tensor fc = flat.view(gate.offset - base, {2 * gate.shape[0], gate.shape[1]});
    return {v("ln1.weight"), {}, v("qkv.weight"), {}, v("proj.weight"), {}, v("ln2.weight"), {}, fc, {},
            v("down.weight"), {}};
  }
  return {v("ln1.weight"), v("ln1.bias"), v("qkv.weight"), v("qkv.bias"), v("proj.weight"), v("proj.bias"),
          v("ln2.weight"), v("ln2.bias"), v("fc.weight"),  v("fc.bias"),  v("fc2.weight"),  v("fc2.bias")};
}

void tp_all_reduce(const LayerDims& d, Tensor& x) {
  if (!d.tp) return;
  NvtxRange r("tp all-reduce");
  d.tp->all_reduce(x, ReduceOp::Sum);
}

Tensor sp_gather(Backend& be, const LayerDims& d, const Tensor& local) {
  if (!d.sp) return local;
  NvtxRange r("sp all-gather");
  Tensor full = be.empty({d.rows(), local.dim(1)}, local.dtype());
  Tensor flat = full.reshape({full.numel()});
  d.tp->all_gather(local.reshape({local.numel()}), flat);
  return full;
}

Tensor partial_rows(Backend& be, const LayerDims& d, const Tensor& out) {
  return d.sp ? be.empty({d.rows(), out.dim(1)}, out.dtype()) : out;
}

void reduce_rows(const LayerDims& d, const Tensor& partial, Tensor& out) {
  if (!d.sp) {
    tp_all_reduce(d, out);
    return;
  }
  NvtxRange r("sp reduce-scatter");
  Tensor flat = out.reshape({out.numel()});
  d.tp->reduce_scatter(partial.reshape({partial.numel()}), flat, ReduceOp::Sum);
}

Tensor attention_qkv(Backend& be, const LayerDims& d, const Tensor& qkv) {
  if (!d.gqa()) return qkv;
  Tensor heads = be.empty({d.rows(), int64_t(3) * d.heads * d.hd}, qkv.dtype());
  be.gqa_expand(heads, qkv, d.heads, d.kv_heads(), d.hd);
  if (d.llama) be.rope(heads, heads, d.s, d.heads, d.hd, d.rope_theta, false);
  return heads;
}

Tensor qkv_grad(Backend& be, const LayerDims& d, const Tensor& dheads) {
  if (!d.gqa()) return dheads;
  Tensor dqkv = be.empty({d.rows(), d.qkv_cols()}, dheads.dtype());
  be.gqa_reduce(dqkv, dheads, d.heads, d.kv_heads(), d.hd);
  return dqkv;
}

Tensor attention_grad(Backend& be, const LayerDims& d, const LayerCache& c, const Tensor& datty) {
  if (d.block) return block_attention_backward(be, d, c, datty);
  Tensor dheads = be.empty({d.rows(), int64_t(3) * d.heads * d.hd}, datty.dtype());
  be.attention_backward(dheads, datty, attention_qkv(be, d, c.qkv), c.probs, d.b, d.s, d.heads, d.hd);
  if (d.llama) be.rope(dheads, dheads, d.s, d.heads, d.hd, d.rope_theta, true);  // the rotation's transpose
  return qkv_grad(be, d, dheads);  // GQA: keys' and values' gradients summed per group
}

int64_t LayerCache::bytes() const {
  int64_t n = 0;
  for (const Tensor* t : {&x, &ln1, &mean1, &rstd1, &qkv, &probs, &atty, &x2, &ln2, &mean2, &rstd2, &fc, &act, &q, &k,
                          &v, &attn.lse, &attn.q_full, &attn.k_full, &attn.v_full, &attn.y_full})
    if (t->defined()) n += t->nbytes();
  // The attention output: atty itself, unless the block attention keeps a copy of its own.
  if (attn.y.defined() && !(atty.defined() && attn.y.raw() == atty.raw())) n += attn.y.nbytes();
  return n;
}

namespace {

void forward_all(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                 LayerCache& c) {
  const int64_t n = d.rows(), nl = d.local_rows();  // nl: this rank's rows (n/t with sp)
  const DType dt = x.dtype();
  c.x = x;
  c.ln1 = be.empty({nl, d.h}, dt);
  c.mean1 = be.empty({nl}, acc_dtype(dt));
  c.rstd1 = be.empty({nl}, acc_dtype(dt));
  be.layernorm_forward(c.ln1, c.mean1, c.rstd1, x, w.ln1_w, w.ln1_b, d.eps);
  c.qkv = be.empty({n, d.qkv_cols()}, dt);
  be.linear_forward(c.qkv, sp_gather(be, d, c.ln1), w.qkv_w, &w.qkv_b);  // sp: g-bar all-gather
  if (d.block) {
    block_attention_forward(be, d, c);
  } else {
    c.probs = be.empty({d.b, d.heads, d.s, d.s}, dt);
    c.atty = be.empty({n, int64_t(d.heads) * d.hd}, dt);
    be.attention_forward(c.atty, c.probs, attention_qkv(be, d, c.qkv), d.b, d.s, d.heads, d.hd);
  }
  c.x2 = be.empty({nl, d.h}, dt);
  Tensor part = partial_rows(be, d, c.x2);
  be.linear_forward(part, c.atty, w.proj_w, d.bias_owner ? &w.proj_b : nullptr);
  reduce_rows(d, part, c.x2);  // g: sum the row-parallel partial outputs (sp: reduce-scatter)
  c.ln2 = be.empty({nl, d.h}, dt);
  c.mean2 = be.empty({nl}, acc_dtype(dt));
  c.rstd2 = be.empty({nl}, acc_dtype(dt));
  be.add_layernorm_forward(c.ln2, c.mean2, c.rstd2, c.x2, x, w.ln2_w, w.ln2_b, d.eps);  // the residual, then ln2
  c.fc = be.empty({n, d.ffn}, dt);
  c.act = be.empty({n, d.ffn}, dt);
  be.linear_gelu_forward(c.act, c.fc, sp_gather(be, d, c.ln2), w.fc_w, w.fc_b);
  part = partial_rows(be, d, y);
  be.linear_forward(part, c.act, w.fc2_w, d.bias_owner ? &w.fc2_b : nullptr);
  reduce_rows(d, part, y);  // g
  be.add_(y, c.x2);         // residual
}

}  // namespace

void release_attention(LayerCache& c) {
  const Tensor x = c.x, ln1 = c.ln1, mean1 = c.mean1, rstd1 = c.rstd1;
  c = LayerCache{};
  c.x = x, c.ln1 = ln1, c.mean1 = mean1, c.rstd1 = rstd1;
}

void layer_forward(Backend& be, const LayerDims& d, const LayerWeights& w, const Tensor& x, Tensor& y,
                   LayerCache& cache, Recompute mode) {
  if (d.llama) llama_forward_all(be, d, w, x, y, cache);
  else forward_all(be, d, w, x, y, cache);
  if (mode == Recompute::Full) {
    cache = LayerCache{};
    cache.x = x;
  }
  else if (mode == Recompute::Selective && d.block) block_attention_drop_core(cache);
  else if (mode == Recompute::Selective) cache.probs = Tensor();
  if (mode != Recompute::Full && d.recompute_act) cache.act = Tensor();  // rebuilt by recompute_activation
}

namespace {

// --recompute-activation: the MLP's activation output from the kept fc, where forward dropped it.
void recompute_activation(Backend& be, const LayerDims& d, LayerCache& c) {
  if (c.act.defined()) return;
  NvtxRange r("recompute activation");
  c.act = be.empty({d.rows(), d.ffn}, c.fc.dtype());
  if (d.llama) be.swiglu_forward(c.act, c.fc);
  else be.gelu_forward(c.act, c.fc);
}

}  // namespace

void layer_backward(Backend& be, const LayerDims& d, const LayerWeights& w, LayerWeights& g,
                    LayerCache& c, const Tensor& dy, Tensor& dx, Recompute mode) {
  const int64_t n = d.rows(), nl = d.local_rows();
  const DType dt = dy.dtype();
  if (mode == Recompute::Full) {  // rerun the forward pass from the kept input (sp: its local rows)
    NvtxRange r("recompute");
    Tensor y = be.empty({nl, d.h}, dt);
    if (d.llama) llama_forward_all(be, d, w, c.x, y, c);
    else forward_all(be, d, w, c.x, y, c);
  } else if (mode == Recompute::Selective && d.block) {
    NvtxRange r("recompute");
    block_attention_recompute(be, d, c);
  } else if (mode == Recompute::Selective) {
    // Korthikanti et al.'s selective recomputation: the attention core (QK^T, softmax, the
    // product with V, whose output goes to scratch) from the kept qkv, for the probabilities.
    NvtxRange r("recompute");
    c.probs = be.empty({d.b, d.heads, d.s, d.s}, dt);
    Tensor scratch = be.empty({n, int64_t(d.heads) * d.hd}, dt);
    be.attention_forward(scratch, c.probs, attention_qkv(be, d, c.qkv), d.b, d.s, d.heads, d.hd);
  }
  recompute_activation(be, d, c);  // --recompute-activation: act from the kept fc
  if (d.llama) {
    llama_backward(be, d, w, g, c, dy, dx);
    c = LayerCache{};
    return;
  }
  // MLP: y = x2 + fc2(gelu(fc(ln2(x2)))). Each tensor is released once its last reader has been
  // queued, so that the attention's backward runs without the MLP's tensors.
  Tensor dact = be.empty({n, d.ffn}, dt);  // the gradient of fc's output, through the GeLU
  be.linear_gelu_backward(dact, g.fc2_w, &g.fc2_b, sp_gather(be, d, dy), c.act, w.fc2_w, c.fc);
  c.act = c.fc = Tensor();
  Tensor dln = be.empty({nl, d.h}, dt);
  Tensor part = partial_rows(be, d, dln);
  be.linear_backward(&part, false, g.fc_w, &g.fc_b, dact, sp_gather(be, d, c.ln2), w.fc_w);
  dact = c.ln2 = Tensor();
  reduce_rows(d, part, dln);  // f: the column-parallel input gradient is a sum over ranks
  Tensor dx2 = be.empty({nl, d.h}, dt);  // the residual stream's gradient dy, plus the norm's
  be.layernorm_backward(dx2, g.ln2_w, g.ln2_b, dln, c.x2, w.ln2_w, c.mean2, c.rstd2, &dy);
  c.x2 = c.mean2 = c.rstd2 = Tensor();
  // Attention: x2 = x + proj(attn(qkv(ln1(x))))
  Tensor datty = be.empty({n, int64_t(d.heads) * d.hd}, dt);
  be.linear_backward(&datty, false, g.proj_w, &g.proj_b, sp_gather(be, d, dx2), c.atty, w.proj_w);
  const Tensor dqkv = attention_grad(be, d, c, datty);
  release_attention(c);
  datty = Tensor();
  be.linear_backward(&part, false, g.qkv_w, &g.qkv_b, dqkv, sp_gather(be, d, c.ln1), w.qkv_w);
  reduce_rows(d, part, dln);  // f
  be.layernorm_backward(dx, g.ln1_w, g.ln1_b, dln, c.x, w.ln1_w, c.mean1, c.rstd1, &dx2);
  c = LayerCache{};  // activations are freed as soon as they are used
}

}  // namespace ptdp
