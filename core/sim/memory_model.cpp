#include "core/sim/memory_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/parallel/schedule.h"
#include "core/sim/stack.h"
#include "core/sim/zero3.h"

namespace ptdp::sim {

double state_bytes_per_param(Precision precision) { return precision == Precision::F32 ? 16.0 : 20.0; }

double state_bytes_per_param(Precision precision, int zero, int dp) {
  const bool f32 = precision == Precision::F32;
  const double d = std::max(dp, 1);
  if (zero == 1) return f32 ? 8 + 8 / d : 4 + 16 / d;
  if (zero == 3) return state_bytes_per_param(precision) / d;
  return state_bytes_per_param(precision);
}

namespace {

struct Dims {
  double E, b, s, h, a, t, f, sbh;  // s: the tokens of a sequence on this rank (s / c)
  double g;  // key/value heads (query groups; a without grouped-query attention)
  bool llama;
  double rowshare;  // of the b*s rows a rank keeps outside the tensor-parallel GEMMs (1/t: sequence parallel)
  bool flash;       // fused attention: no s x s scores kept or in the working set
  explicit Dims(const RunConfig& c)
      : E(HardwareProfile::element_bytes(c.precision)),
        b(c.par.micro_batch),
        s(double(c.model.seq_length) / c.par.cp),  // context parallelism: this rank's tokens
        h(c.model.hidden),
        a(c.model.heads),
        t(c.par.tp),
        f(c.model.ffn_hidden()),
        sbh(b * s * h),
        g(c.model.groups()),
        llama(c.model.arch == Arch::Llama),
        rowshare(c.par.sequence_parallel && c.par.tp > 1 ? 1.0 / c.par.tp : 1.0),
        flash(software_stack(c.stack).flash_attention) {}
};

}  // namespace

double layer_activation_bytes(const RunConfig& cfg, Recompute mode) {
  const Dims d(cfg);
  if (mode == Recompute::Full) return d.E * d.sbh * d.rowshare;
  // Flash attention keeps the softmax statistics (fp32, one per row and head), not the scores.
  const double attention_core =
      d.flash ? 4 * d.a * d.s * d.b / d.t
              : (d.llama ? d.E : 2 * d.E + 1) * d.a * d.s * d.s * d.b / d.t;  // llama: no dropout mask
  // q, k, v kept for the attention core, in units of sbh/t: 3 with multi-head attention; with g
  // query groups 1 + 2g/a under flash attention (it reads the groups' k and v as they are), and
  // still 3 without it (Megatron's unfused core attention expands k and v to every head with
  // repeat_interleave, and the products keep the expanded copies).
  const double qkv = d.flash ? 1 + 2 * d.g / d.a : 3.0;
  if (d.llama) {
    // No dropout masks; q, k, v, the projection input, gate and up (2f), the down input (f).
    const double dense = d.sbh * (4 * d.E * d.rowshare + ((qkv + 1) * d.E + 3 * d.E * d.f / d.h) / d.t);
    return mode == Recompute::Selective ? dense : dense + attention_core;
  }
  // q, k, v, the projection input, fc's output and GeLU's output (f = 4h each: 12 for MHA).
  const double dense = d.sbh * ((4 * d.E + 2) * d.rowshare + (qkv + 1 + 2 * d.f / d.h) * d.E / d.t);
  return mode == Recompute::Selective ? dense : dense + attention_core;
}

int peak_in_flight(const RunConfig& cfg, int stage) {
  const ParallelConfig& p = cfg.par;
  const ScheduleKind kind = p.schedule;
  const int m = p.num_microbatches();
  if (kind == ScheduleKind::GPipe) return m;
  if (kind == ScheduleKind::OneFOneB) return std::min(p.pp - stage, m);
  int now = 0, peak = 0;
  for (const Action& a : make_schedule(kind, p.pp, m, p.vpp, stage)) {
    if (a.op == Op::Forward) peak = std::max(peak, ++now);
    if (a.op == Op::Backward) --now;
  }
  return peak;
}

MemoryVerdict memory_verdict(const RunConfig& cfg, const HardwareProfile& hw, std::vector<int> in_flight,
                             const Zero3Options& z3) {
  const ParallelConfig& par = cfg.par;
  const ModelConfig& mc = cfg.model;
  const Dims d(cfg);
  const int p = par.pp, v = par.vpp;
  if (in_flight.empty())
    for (int s = 0; s < p; ++s) in_flight.push_back(peak_in_flight(cfg, s));
  const LayerSplit split = par.layer_split(mc.layers);
  const double vt = double(mc.padded_vocab(par.tp)) / par.tp;
  const ModelTensors tensors = model_tensors(mc, mc.padded_vocab(par.tp));
  const double per_layer = double(tensors.layer_numel(par.tp));
  // Kept per (micro-batch, chunk): the layers' activations and the chunk's output (Megatron v2.5
  // keeps the output tensor it sent until the backward).
  // (Megatron since 2022 frees the sent data: stack.h, free_pipeline_outputs.)
  // DeepSpeed frees a partitioned output's data once sent (first_output.data = torch.zeros(1))
  // and all-gathers it again for the backward.
  const SoftwareStack stack = software_stack(cfg.stack);
  const bool freed = stack.free_pipeline_outputs || (stack.deepspeed_engine && d.t > 1);
  const double sent = freed ? 0.0 : d.E * d.sbh * d.rowshare;
  const double layer_act = layer_activation_bytes(cfg, par.recompute);
  // Working set of one layer's backward (recomputed if need be), by liveness: autograd frees what
  // a module saved once its backward has run, so the peak is the larger of two moments.
  //  - The MLP's backward: every saved tensor of the layer, the incoming b*s*h gradient and the
  //    gradients of the MLP's two widest tensors (gpt: 4h each; llama: gate|up 2f and the f input
  //    of down).
  //  - The attention core's backward (without flash attention): the MLP's tensors are gone; the
  //    norm's input and output, q|k|v and the core's saved tensors stay, beside the gradients of
  //    the scores (one s x s buffer), of the core's output and q|k|v (b*s*h/t each) and the
  //    residual stream's.
  const double scores = d.flash ? 0.0 : d.a / d.t * d.s * d.s * d.b;
  const double mlp_grads = d.llama ? 3 * d.f : 2 * d.f;
  const double all_saved = layer_activation_bytes(cfg, Recompute::None);
  const double mlp_peak = all_saved + d.E * (d.sbh + mlp_grads * d.b * d.s / d.t);
  const double core_saved = (d.llama ? d.E : 2 * d.E + 1) * scores;  // probs (+ dropout mask and output)
  const double attention_peak = scores > 0 ? core_saved + d.E * scores + d.E * d.sbh * (2 * d.rowshare + 1) +
                                                 5 * d.E * d.sbh / d.t
                                           : 0.0;
  // The p2p ring's receive buffers: two key/value blocks in flight (2 b (s/c) (2 g/t) hd E each).
  const double ring = par.cp > 1 && par.cp_comm == CpComm::P2P ? 2 * d.E * d.b * d.s * 2 * d.g * d.h / d.a / d.t : 0.0;
  const double layer_ws = std::max(mlp_peak, attention_peak) + ring;
  const double logits = d.b * d.s * vt;

  const bool ds_bf16 = bf16_optimizer(stack, cfg.precision);
  MemoryVerdict out;
  out.capacity = hw.memory_bytes;
  out.zero = par.zero;
  out.dp = par.dp * par.cp;  // the distributed optimizer shards over d c ranks
  for (int s = 0; s < p; ++s) {
    StageMemory m;
    // Each stage holds its own layers (uneven first and last stages: core/model/layer_split.h).
    const double stage_layers = stage_layer_count(split, s);
    m.params = stage_layers * per_layer;
    double working = layer_ws;
    if (s == 0) {
      m.params += double(ModelTensors::sum_numel(tensors.first, par.tp));  // llama: no position table
      working = std::max(working, d.E * vt * d.h);  // dense embedding gradient
    }
    if (s == p - 1) {
      // The final norm and llama's own untied output layer; gpt's tied copy of the embedding when p > 1.
      const bool tied_copy = tensors.tied && p > 1;
      m.params += double(ModelTensors::sum_numel(tensors.last, par.tp) +
                         (tied_copy ? tensors.embedding().numel_per_rank(par.tp) : 0));
      working = std::max(working, logits * (d.E + 4 + 4));  // fp16 logits, fp32 softmax and gradient
    }
    // DeepSpeed's BF16_Optimizer (megatron-deepspeed, bf16): bf16 weights and gradients, an
    // unsharded fp32 gradient buffer, the fp32 master weights and Adam moments sharded over d.
    m.state = m.params * (ds_bf16 ? 2 + 2 + 4 + 12.0 / std::max(par.dp, 1)
                                  : state_bytes_per_param(cfg.precision, par.zero, out.dp));
    if (par.zero == 3) {
      // The tensors DeepSpeed does not partition stay whole: their weight and gradient.
      const double persistent = zero3_persistent_params(cfg, z3);
      m.state += persistent * 2 * d.E * (1 - 1.0 / std::max(par.dp, 1));
      working += zero3_gathered_bytes(cfg, z3);
    }
    m.in_flight = in_flight[s];
    m.activations = m.in_flight * (stage_layers / v * layer_act + sent) * hw.allocator_overhead;
    m.working = working * hw.allocator_overhead;
    m.reserved = hw.reserved_bytes;
    if (m.total() > out.peak) {
      out.peak = m.total();
      out.worst_stage = s;
    }
    out.stages.push_back(m);
  }
  out.fits = out.peak <= out.capacity;
  return out;
}

std::string MemoryVerdict::describe(const std::string& device) const {
  const StageMemory& m = stages[worst_stage];
  const std::string sharded = zero > 0 ? fmt::format(", ZeRO-{} over {} ranks", zero, dp) : std::string();
  return fmt::format(
      "{}: stage {} needs {:.1f} GB (state {:.1f} GB for {:.3g}B parameters{}, activations {:.1f} GB for {} "
      "micro-batch chunks in flight, working set {:.1f} GB, reserved {:.1f} GB) of the {:.1f} GB of {}",
      fits ? "fits" : "out of memory", worst_stage, peak / 1e9, m.state / 1e9, m.params / 1e9, sharded,
      m.activations / 1e9, m.in_flight, m.working / 1e9, m.reserved / 1e9, capacity / 1e9, device);
}

}  // namespace ptdp::sim
