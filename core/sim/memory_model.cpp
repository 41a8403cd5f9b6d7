#include "core/sim/memory_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/parallel/schedule.h"
#include "core/sim/precision_knobs.h"
#include "core/sim/ptdp_memory.h"
#include "core/sim/stack.h"
#include "core/sim/zero3.h"

namespace ptdp::sim {

double state_bytes_per_param(Precision precision) { return precision == Precision::F32 ? 16.0 : 20.0; }

double state_bytes_per_param(Precision precision, int zero, int dp) {
  const bool f32 = precision == Precision::F32;
  const double d = std::max(dp, 1);
  if (zero == 1) return f32 ? 8 + 8 / d : 4 + 16 / d;
  if (zero == 2) return f32 ? 4 + 12 / d : 2 + 18 / d;  // the gradient sharded too
  if (zero == 3) return state_bytes_per_param(precision) / d;
  return state_bytes_per_param(precision);
}

StateBytes state_bytes(const RunConfig& cfg) { return state_bytes(cfg, precision_knobs(cfg)); }

namespace {
// Bytes per parameter of Megatron's main-gradient buffer: fp32 where the stack accumulates in fp32
// or the run is bf16 (--accumulate-allreduce-grads-in-fp32), bf16 with --grad-reduce-in-bf16, else
// fp16.
double main_grad_buffer_bytes(const RunConfig& cfg, const SoftwareStack& stack, const PrecisionKnobs& knobs) {
  const int stack_grad = stack.grad_bytes > 0 ? stack.grad_bytes : (cfg.precision == Precision::Bf16 ? 4 : 2);
  return knobs.grad_reduce_bf16 ? 2 : stack_grad;
}
}  // namespace

StateBytes state_bytes(const RunConfig& cfg, const PrecisionKnobs& knobs) {
  const SoftwareStack stack = software_stack(cfg.stack);
  const ParallelConfig& par = cfg.par;
  const double d = std::max(par.dp * par.cp, 1);  // the distributed optimizer shards over d c ranks
  if (stack.ptdp_kernels) {
    const double b = ptdp_state_bytes_per_param(cfg, knobs);
    return {b, b};
  }
  if (bf16_optimizer(stack, cfg.precision)) {
    const double b = 2 + 2 + 4 + 12.0 / d;  // bf16 weight and gradient, unsharded fp32 gradient buffer
    return {b, b};
  }
  const double table = state_bytes_per_param(cfg.precision, par.zero, par.dp * par.cp);
  if (cfg.precision == Precision::F32) return {table, table};
  // DeepSpeed's stage 3 makes a shard's fp32 gradient in the step, from its fp16 gradient
  // partitions (stage3.py, _prepare_fp32_grad_for_sub_group), and drops it after: the passes hold
  // the fp16 weight and gradient partitions, the fp32 master and Adam's two moments, 16/d bytes.
  if (par.zero == 3) return {table - 4.0 / d, table};
  const double buffer = main_grad_buffer_bytes(cfg, stack, knobs);
  // The distributed optimizer (zero 1) shards the optimizer's state; ZeRO-2 the gradients too: each
  // micro-batch's are reduce-scattered into the rank's 1/d of the buffer (the unsharded ones in
  // flight are in stage_memory's working set).
  const double dz = par.zero == 1 || par.zero == 2 ? d : 1.0;
  const double dg = par.zero == 2 ? d : 1.0;
  const double passes = 2 + buffer / dg + knobs.adam_state_bytes() / dz;
  // A master gradient of another dtype than the buffer is made in the step (main_grad.float())
  // and freed by the next iteration's zero_grad(set_to_none=True); else it is the buffer itself.
  const double step_copy = buffer != knobs.main_grad_bytes ? knobs.main_grad_bytes / dz : 0.0;
  return {passes, passes + step_copy};
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

// --fp8-format: Transformer Engine saves the linear layers' inputs for the weight gradient as
// their FP8 copies (1 byte, not E): QKV's and fc1's (the norms' outputs, rowshare each), proj's and
// fc2's (b s h / t and b s f / t).
double fp8_saved_input_savings(const RunConfig& cfg, const Dims& d) {
  if (cfg.fp8_format == Fp8Format::None) return 0;
  return (d.E - 1) * d.sbh * (2 * d.rowshare + (1 + d.f / d.h) / d.t);
}

// --fp8-format: what FP8 adds to the stage's layer weights, per parameter: the FP8 copy and its
// transpose that TE casts on a step's first micro-batch and keeps for the others (2 bytes:
// `weight1_fp8` and `weight1_t_fp8`, TE's TransformerEngineBaseModule.set_fp8_weights), or with
// --fp8-param-gather the weights themselves held in FP8 with their cached transpose instead of
// 16 bits (2 - E bytes: the state counts E for them).
double fp8_weight_bytes(const RunConfig& cfg, int s) {
  if (cfg.fp8_format == Fp8Format::None) return 0;
  const ParallelConfig& par = cfg.par;
  const ModelTensors tensors = model_tensors(cfg.model, cfg.model.padded_vocab(par.tp));
  const double per_param = cfg.fp8_param_gather ? 2 - HardwareProfile::element_bytes(cfg.precision) : 2;
  return per_param * stage_layer_count(par.layer_split(cfg.model.layers), s) * double(tensors.layer_numel(par.tp));
}

// A layer's kept activations with every tensor 16-bit (a full recomputation's aside).
double layer_activation_bytes_16bit(const RunConfig& cfg, Recompute mode) {
  const Dims d(cfg);
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

}  // namespace

double layer_activation_bytes(const RunConfig& cfg, Recompute mode) {
  const Dims d(cfg);
  if (mode == Recompute::Full) return d.E * d.sbh * d.rowshare;
  return layer_activation_bytes_16bit(cfg, mode) - fp8_saved_input_savings(cfg, d);
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

namespace {

// What one (micro-batch, chunk) keeps and what a backward adds, for the run's stack. Lifetimes:
//  - a layer's saved tensors: from its forward to its backward (per recompute mode); the number
//    of (micro-batch, chunk) pairs alive at once is counted on the schedule's action list;
//  - the chunk's output: until the backward in Megatron v2.5; freed once sent where the stack
//    has deallocate_output_tensor (2022, mcore, ptdp) or partitions it (DeepSpeed, t > 1);
//  - the working set: one layer's backward at a time (autograd frees a node's saved tensors
//    after its backward), the loss head's logits on the last stage, the embedding's dense
//    gradient on the first;
//  - state: stage lifetime, the fp32 master gradients of fp16 runs only inside the step
//    (state_bytes); CUDA context, NCCL buffers and workspaces: the profile's reserved memory.
struct ActivationTerms {
  double layer_act = 0;  // kept per layer per (micro-batch, chunk) in flight
  double sent = 0;       // the chunk's output, kept until its backward
  double layer_ws = 0;   // one layer's backward peak
  double head_ws = 0;    // the loss head's peak (last stage)
  double embed_ws = 0;   // the dense embedding gradient (first stage)
  // Allocator factor on the kept activations. They are allocated during forwards among the
  // forwards' temporaries and freed by backwards in another order (1F1B), leaving holes that the
  // next micro-batch's tensors fill only in part: the caching allocator's fragmentation (the
  // profile's allocator_overhead, fitted to Fig. 17). The working set is not scaled: every layer's
  // backward asks for the same sizes in the same order, served from the blocks the previous
  // layer's backward freed (best fit on equal sizes reuses them exactly).
  double overhead = 1;
};

ActivationTerms megatron_terms(const RunConfig& cfg, const HardwareProfile& hw) {
  const Dims d(cfg);
  const double vt = double(cfg.model.padded_vocab(cfg.par.tp)) / cfg.par.tp;
  ActivationTerms out;
  // Kept per (micro-batch, chunk): the layers' activations and the chunk's output (Megatron v2.5
  // keeps the output tensor it sent until the backward).
  // (Megatron since 2022 frees the sent data: stack.h, free_pipeline_outputs.)
  // DeepSpeed frees a partitioned output's data once sent (first_output.data = torch.zeros(1))
  // and all-gathers it again for the backward.
  const SoftwareStack stack = software_stack(cfg.stack);
  const bool freed = stack.free_pipeline_outputs || (stack.deepspeed_engine && d.t > 1);
  out.sent = freed ? 0.0 : d.E * d.sbh * d.rowshare;
  out.layer_act = layer_activation_bytes(cfg, cfg.par.recompute);
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
  const ParallelConfig& par = cfg.par;
  const double ring = par.cp > 1 && par.cp_comm == CpComm::P2P ? 2 * d.E * d.b * d.s * 2 * d.g * d.h / d.a / d.t : 0.0;
  out.layer_ws = std::max(mlp_peak, attention_peak) + ring;
  out.head_ws = d.b * d.s * vt * (d.E + 4 + 4);  // fp16 logits, fp32 softmax and gradient
  out.embed_ws = d.E * vt * d.h;
  out.overhead = hw.allocator_overhead;
  return out;
}

// ptdp's executor (ptdp_memory.h): its allocator's peak counts the rounded sizes in use, and it
// has no fragmentation beyond that rounding (one cudaMalloc a block, the cache released and the
// allocation retried when the device is full: device_allocator.cpp); a sent output is freed;
// the embedding's gradient accumulates into the f32 gradient buffer.
ActivationTerms ptdp_terms(const RunConfig& cfg) {
  ActivationTerms out;
  out.layer_act = ptdp_layer_kept_bytes(cfg, cfg.par.recompute);
  out.layer_ws = ptdp_backward_peak_bytes(cfg, cfg.par.recompute);
  out.head_ws = ptdp_head_peak_bytes(cfg);
  return out;
}

// The stage's parameters (uneven first and last stages: core/model/layer_split.h): its layers,
// the embedding on the first (llama: no position table), the final norm, llama's untied output
// layer and gpt's tied copy of the embedding (p > 1) on the last.
double stage_params(const RunConfig& cfg, int s) {
  const ParallelConfig& par = cfg.par;
  const ModelConfig& mc = cfg.model;
  const ModelTensors tensors = model_tensors(mc, mc.padded_vocab(par.tp));
  double params = stage_layer_count(par.layer_split(mc.layers), s) * double(tensors.layer_numel(par.tp));
  if (s == 0) params += double(ModelTensors::sum_numel(tensors.first, par.tp));
  if (s == par.pp - 1) {
    const bool tied_copy = tensors.tied && par.pp > 1;
    params += double(ModelTensors::sum_numel(tensors.last, par.tp) +
                     (tied_copy ? tensors.embedding().numel_per_rank(par.tp) : 0));
  }
  return params;
}

StageMemory stage_memory(const RunConfig& cfg, const HardwareProfile& hw, const ActivationTerms& a,
                         const StateBytes& per_param, int s, int in_flight, const Zero3Options& z3) {
  const ParallelConfig& par = cfg.par;
  const double stage_layers = stage_layer_count(par.layer_split(cfg.model.layers), s);
  StageMemory m;
  m.params = stage_params(cfg, s);
  double working = a.layer_ws;
  if (s == 0) working = std::max(working, a.embed_ws);
  if (s == par.pp - 1) working = std::max(working, a.head_ws);
  m.state = m.params * per_param.backward + fp8_weight_bytes(cfg, s);
  m.step_state = m.params * per_param.step + fp8_weight_bytes(cfg, s);
  if (par.zero == 2) {
    // The unsharded gradients in flight: the layer whose backward writes them and the previous
    // one, reduce-scattered meanwhile (Megatron-FSDP's unit is a layer, its buffers doubled).
    const ModelTensors tensors = model_tensors(cfg.model, cfg.model.padded_vocab(par.tp));
    const PrecisionKnobs knobs = precision_knobs(cfg);
    working += 2 * double(tensors.layer_numel(par.tp)) * main_grad_buffer_bytes(cfg, software_stack(cfg.stack), knobs);
  }
  if (par.zero == 3) {
    // The tensors DeepSpeed does not partition stay whole: their weight and gradient.
    const double E = HardwareProfile::element_bytes(cfg.precision);
    const double persistent = zero3_persistent_params(cfg, z3) * 2 * E * (1 - 1.0 / std::max(par.dp, 1));
    m.state += persistent;
    m.step_state += persistent;
    working += zero3_gathered_bytes(cfg, z3);
  }
  // DeepSpeed's contiguous checkpointing (ZeRO-3 under full recomputation) copies the checkpoints
  // into one preallocated buffer: no allocator overhead on them.
  const bool contiguous = par.zero == 3 && z3.contiguous_checkpoints && par.recompute == Recompute::Full;
  m.in_flight = in_flight;
  m.activations = m.in_flight * (stage_layers / par.vpp * a.layer_act + a.sent) * (contiguous ? 1.0 : a.overhead);
  m.working = working;
  m.reserved = hw.reserved_bytes;
  return m;
}

}  // namespace

MemoryVerdict memory_verdict(const RunConfig& cfg, const HardwareProfile& hw, std::vector<int> in_flight,
                             const Zero3Options& z3) {
  const StateBytes per_param = state_bytes(cfg);
  const int p = cfg.par.pp;
  if (in_flight.empty())
    for (int s = 0; s < p; ++s) in_flight.push_back(peak_in_flight(cfg, s));
  const ActivationTerms terms =
      software_stack(cfg.stack).ptdp_kernels ? ptdp_terms(cfg) : megatron_terms(cfg, hw);
  MemoryVerdict out;
  out.capacity = hw.memory_bytes;
  out.zero = cfg.par.zero;
  out.dp = cfg.par.dp * cfg.par.cp;  // the distributed optimizer shards over d c ranks
  for (int s = 0; s < p; ++s) {
    const StageMemory m = stage_memory(cfg, hw, terms, per_param, s, in_flight[s], z3);
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
