#include "core/sim/kernel_builder.h"

#include <algorithm>

namespace ptdp::sim {

LayerShape layer_shape(const RunConfig& cfg, const ModelTensors& tensors, int elem) {
  const ModelConfig& mc = cfg.model;
  const ParallelConfig& pc = cfg.par;
  LayerShape d;
  d.E = elem;
  d.t = pc.tp;
  const double a = mc.heads;
  d.b = pc.micro_batch;
  d.s = mc.seq_length;
  d.h = mc.hidden;
  d.cp = pc.cp;
  d.cp_comm = pc.cp_comm;
  d.sl = d.s / d.cp;
  d.rows = d.b * d.sl;
  d.bsh = d.rows * d.h;
  d.hd = d.h / a;
  d.ht = d.h / d.t;
  d.at = a / d.t;
  d.ft = double(mc.ffn_hidden()) / d.t;
  d.qkvt = double(module_gemm(tensors, kModuleQkv, d.t).out);
  d.kvt = d.qkvt - d.ht;
  d.fc_out = double(module_gemm(tensors, kModuleFc, d.t).out);
  d.vt = double(logits_gemm(tensors, d.t).out);
  d.scores = d.b * d.at * d.s * d.s;
  d.llama = mc.arch == Arch::Llama;
  d.gqa = mc.gqa();
  d.sp = pc.sequence_parallel && d.t > 1;
  d.rowshare = d.sp ? 1.0 / d.t : 1.0;
  d.fp8 = cfg.fp8_format != Fp8Format::None;
  if (d.fp8 && pc.micro_batch * pc.dp > 0) d.weight_cast_share = 1.0 / std::max(1, pc.num_microbatches());
  // --fp8-param-gather: the weight is FP8 already; only its transpose is made (1 byte read, 1
  // written: half of the 16-bit cast-transpose's 4).
  if (cfg.fp8_param_gather) d.weight_cast_share *= 0.5;
  d.cudnn = cfg.attention_backend == AttentionBackend::Cudnn;  // stack_refusal: --stack ptdp or mcore
  d.recompute_act = pc.recompute_activation;                   // stack_refusal: --stack ptdp
  return d;
}

TpRules tp_rules(const SoftwareStack& stack, const LayerShape& d) {
  return {stack.tp_comm_overlap && d.sp, stack.tp_backward_overlap};
}

Kernel& KernelBuilder::add(const char* name, KernelKind kind) {
  Kernel& k = list.emplace_back();
  k.name = name;
  k.phase = phase;
  k.where = where;
  k.kind = kind;
  k.module = module;
  k.pre = pre;
  k.op = op;
  return k;
}

int KernelBuilder::gemm(const char* name, double m, double n, double k, const char* detail) {
  Kernel g;
  g.name = name;
  g.m = m;
  g.n = n;
  g.k = k;
  g.detail = detail;
  if (fp8) fp8_casts(*this, g);
  Kernel& x = add(name, KernelKind::Gemm);
  x.m = m;
  x.n = n;
  x.k = k;
  x.detail = detail;
  x.fp8 = fp8;
  return int(list.size()) - 1;
}

void KernelBuilder::attention(const char* name, double m, double n, double k, double batch) {
  Kernel& x = add(name, KernelKind::Attention);
  x.m = m;
  x.n = n;
  x.k = k;
  x.batch = batch;
}

void KernelBuilder::membound(const char* name, double bytes, int calls) {
  Kernel& x = add(name, KernelKind::Membound);
  x.bytes = bytes;
  x.calls = calls;
}

void KernelBuilder::collective(const char* name, Collective c, double bytes, Overlap o, int gemm,
                               const char* detail) {
  Kernel& x = add(name, KernelKind::TpComm);
  x.op = nullptr;  // the communicator's, not a backend op
  x.collective = c;
  x.bytes = bytes;
  x.overlap = o;
  x.gemm = gemm;
  x.detail = detail;
}

void KernelBuilder::cp_collective(const char* name, Collective c, double bytes, Overlap o, int first, int span) {
  collective(name, c, bytes, o, first);
  list.back().span = span;
  list.back().group = Group::Context;
}

// The collectives exist where the group does (t > 1); alone they would cost nothing.
void column_forward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double n) {
  // TE's "ring_exchange" (qkv and fc forward): the all-gather's chunks move on the copy engines
  // while the GEMM runs as t chunk GEMMs over several streams; the remote chunks' exchange runs
  // under the chunks already there.
  if (d.sp)
    x.collective(name, Collective::AllGather, d.E * d.bsh, r.pipelined ? Overlap::RingExchange : Overlap::None,
                 int(x.list.size()) + 1);
  x.gemm(name, d.rows, n, d.h);
}

void row_forward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double k) {
  const int g = x.gemm(name, d.rows, d.h, k);
  if (d.t == 1) return;
  // TE's "pipeline" (proj and fc2 forward): the GEMM on SMs - 16 in 4 chunks, each chunk's
  // reduce-scatter on 16 SMs under the next chunk's GEMM.
  if (r.pipelined) x.collective(name, Collective::ReduceScatter, 0, Overlap::SmMargin, g, "SM margin");
  x.collective(name, d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh,
               r.pipelined ? Overlap::SmPipeline : Overlap::None, g);
}

// The input gradient, then its all-reduce (sequence parallel: reduce-scatter) and the weight
// gradient. Megatron since Sept. 2021 runs the collective during the weight-gradient GEMM, and
// sequence parallelism's second all-gather of X (it keeps X sharded) during the input-gradient
// GEMM; under TE's userbuffers both are "bulk" overlaps on 16 SMs.
void column_backward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double n) {
  const Overlap beside = r.pipelined ? Overlap::SmBulk : r.beside_backward ? Overlap::BesideGemm : Overlap::None;
  const int dgrad = x.gemm(name, d.rows, d.h, n, "dgrad");
  if (r.pipelined) x.collective(name, Collective::AllGather, 0, Overlap::SmMargin, dgrad, "SM margin");
  if (d.sp) x.collective(name, Collective::AllGather, d.E * d.bsh, beside, dgrad, "input again");
  const int wgrad = x.gemm(name, d.h, n, d.rows, "wgrad");
  if (d.t == 1) return;
  if (r.pipelined) x.collective(name, Collective::ReduceScatter, 0, Overlap::SmMargin, wgrad, "SM margin");
  x.collective(name, d.sp ? Collective::ReduceScatter : Collective::AllReduce, d.E * d.bsh, beside, wgrad, "dgrad");
}

// Sequence parallelism first gathers the output gradient (TE: a ring exchange under the
// input-gradient GEMM).
void row_backward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double k) {
  const int dgrad = int(x.list.size()) + (d.sp ? 1 : 0);
  if (d.sp)
    x.collective(name, Collective::AllGather, d.E * d.bsh, r.pipelined ? Overlap::RingExchange : Overlap::None, dgrad,
                 "output grad");
  x.gemm(name, d.rows, k, d.h, "dgrad");
  x.gemm(name, k, d.h, d.rows, "wgrad");
}

void layer_kernels(KernelList& list, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg) {
  const Recompute rc = cfg.par.recompute;
  for (Phase phase : {Phase::Forward, Phase::Recompute, Phase::Backward}) {
    if (phase == Phase::Recompute && rc == Recompute::None) continue;
    KernelBuilder x{list, phase};
    const bool core_only = phase == Phase::Recompute && rc == Recompute::Selective;
    if (phase == Phase::Backward && stack.ptdp_kernels) ptdp_layer_backward(x, d);
    else if (phase == Phase::Backward) megatron_layer_backward(x, d, stack, cfg);
    else if (stack.ptdp_kernels) ptdp_layer_forward(x, d, core_only);
    else megatron_layer_forward(x, d, stack, cfg, core_only);
  }
}

void gradient_accumulation(KernelList& list, double bytes, const double (&part)[kLayerModules], double whole) {
  KernelBuilder x{list, Phase::Backward};
  for (int i = 0; i < kLayerModules; ++i) {
    x.in(i).membound("weight grads into main_grad", bytes);
    list.back().part = part[i];
    list.back().whole = whole;
  }
}

}  // namespace ptdp::sim
