// The first stage's embedding and the last stage's output layer as kernels: Megatron's (word
// gather and position add, dropout, the fp32 vocab-parallel cross-entropy as PyTorch's kernels).
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

}  // namespace

void edge_kernels(KernelList& list, const LayerShape& d, const SoftwareStack& stack, const EdgeParams& p) {
  megatron_embedding(list, d, p);
  megatron_head(list, d, tp_rules(stack, d), p);
}

}  // namespace ptdp::sim
