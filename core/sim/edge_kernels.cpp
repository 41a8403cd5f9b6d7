// The first stage's embedding and the last stage's output layer as kernels: Megatron's (word
// gather and position add, dropout, the fp32 vocab-parallel cross-entropy as PyTorch's kernels)
// and ptdp's CUDA backend's (its embedding and cross-entropy ops).
#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

namespace {

void megatron_embedding(KernelList& list, const LayerShape& d, const EdgeParams& p) {
  const bool gpt = !d.llama;
  KernelBuilder f{list, Phase::Forward, Where::Embedding};
  f.membound("word gather + position add", (d.llama ? 2 : 3) * d.E * d.bsh);  // llama: no position table
  if (d.t > 1)  // vocab-parallel: the shards' rows summed
    f.collective("embedding", d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh);
  if (gpt) f.membound("embedding dropout", (2 * d.E + 1) * d.bsh * d.rowshare);
  KernelBuilder b{list, Phase::Backward, Where::Embedding};
  if (gpt) b.membound("dropout backward", (2 * d.E + 1) * d.bsh * d.rowshare);
  if (d.sp) b.collective("embedding", Collective::AllGather, d.E * d.bsh);  // the reduce-scatter's gradient
  b.membound("dense embedding grad: zero-fill", d.E * p.embedding);
  b.membound("scatter-add of the rows", 3 * d.E * d.bsh);
  b.membound("into main_grad", p.grad_bytes_per_param * (p.embedding + p.position));
}

void megatron_head(KernelList& list, const LayerShape& d, const TpRules& r, const EdgeParams& p) {
  const double logits = d.rows * d.vt;
  KernelBuilder f{list, Phase::Forward, Where::Head};
  f.membound("final norm", 2 * d.E * d.bsh * d.rowshare);
  column_forward(f, d, r, "logits", d.vt);  // sequence parallel: after an all-gather
  f.membound("to fp32", (d.E + 4) * logits);
  f.membound("max", 4 * logits);
  f.membound("subtract", 8 * logits);
  f.membound("exp", 8 * logits);
  f.membound("sum", 4 * logits);
  f.membound("normalise", 8 * logits);  // kept for backward
  if (d.t > 1)  // max, target logit, sum: three small all-reduces
    for (int i = 0; i < 3; ++i) f.collective("cross-entropy", Collective::AllReduce, 4 * d.rows);
  KernelBuilder b{list, Phase::Backward, Where::Head};
  b.membound("softmax - one-hot", 8 * logits);
  b.membound("scale, to fp16", (4 + d.E) * logits);
  column_backward(b, d, r, "logits", d.vt);
  b.membound("output weight grad into main_grad", p.grad_bytes_per_param * p.embedding);
  b.membound("final norm backward", 4 * d.E * d.bsh * d.rowshare);
}

void ptdp_embedding(KernelList& list, const LayerShape& d) {
  const double n = d.rows, wpe = d.llama ? 0 : 1;
  KernelBuilder f{list, Phase::Forward, Where::Embedding};
  f.run_in("embedding_forward").membound("word gather + position add", d.E * n * d.h * (2 + wpe) + 4 * n);
  if (d.t > 1) f.collective("embedding", d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh);
  KernelBuilder b{list, Phase::Backward, Where::Embedding};
  if (d.sp) b.collective("embedding", Collective::AllGather, d.E * d.bsh);
  b.run_in("embedding_backward").membound("scatter-add into the f32 grads", n * d.h * (d.E + 8 * (1 + wpe)) + 4 * n);
}

void ptdp_head(KernelList& list, const LayerShape& d) {
  const double n = d.rows, nl = d.rows * d.rowshare, logits = d.rows * d.vt;
  KernelBuilder f{list, Phase::Forward, Where::Head};
  if (d.llama) f.run_in("rmsnorm_forward").membound("final norm", d.E * (2 * nl * d.h + d.h) + 4 * nl);
  else f.run_in("layernorm_forward").membound("final norm", d.E * (2 * nl * d.h + 2 * d.h) + 8 * nl);
  if (d.sp) f.collective("logits", Collective::AllGather, d.E * d.bsh);
  f.run_in("linear_forward").gemm("logits", d.rows, d.vt, d.h);
  const char* steps[] = {"xent_row_max", "xent_sum_exp", "xent_target_logit"};
  const double bytes[] = {d.E * logits + 4 * n, d.E * logits + 8 * n, d.E * n + 12 * n};
  for (int i = 0; i < 3; ++i) {
    f.run_in(steps[i]).membound(steps[i], bytes[i]);
    if (d.t > 1) f.collective("cross-entropy", Collective::AllReduce, 4 * n);
  }
  f.run_in("xent_loss").membound("xent_loss", 16 * n);
  f.run_in("sum").membound("loss sum", 4 * n);
  KernelBuilder b{list, Phase::Backward, Where::Head};
  b.run_in("xent_backward").membound("xent_backward", 2 * d.E * logits + 12 * n);
  if (d.sp) b.collective("logits", Collective::AllGather, d.E * d.bsh, Overlap::None, -1, "input again");
  b.run_in("linear_backward");
  b.gemm("logits", d.rows, d.h, d.vt, "dgrad");
  b.gemm("logits", d.h, d.vt, d.rows, "wgrad");
  if (d.t > 1) b.collective("logits", d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh);
  b.run_in("fill").membound("zero the residual grad", d.E * nl * d.h);
  if (d.llama) b.run_in("rmsnorm_backward").membound("final norm backward", d.E * (4 * nl * d.h + d.h) + 4 * nl + 8 * d.h);
  else b.run_in("layernorm_backward").membound("final norm backward", d.E * (3 * nl * d.h + d.h) + 8 * nl + 16 * d.h);
}

}  // namespace

void edge_kernels(KernelList& list, const LayerShape& d, const SoftwareStack& stack, const EdgeParams& p) {
  if (stack.ptdp_kernels) {
    ptdp_embedding(list, d);
    ptdp_head(list, d);
    return;
  }
  megatron_embedding(list, d, p);
  megatron_head(list, d, tp_rules(stack, d), p);
}

}  // namespace ptdp::sim
