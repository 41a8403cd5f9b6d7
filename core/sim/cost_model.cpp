#include "core/sim/cost_model.h"

#include <algorithm>
#include <numeric>

#include "core/common/error.h"
#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

PassCost& PassCost::operator+=(const PassCost& o) {
  gemm += o.gemm;
  attention += o.attention;
  membound += o.membound;
  tp_comm += o.tp_comm;
  return *this;
}

PassCost PassCost::operator*(double f) const { return {gemm * f, attention * f, membound * f, tp_comm * f}; }

void PassCost::add(KernelKind kind, double seconds) {
  switch (kind) {
    case KernelKind::Gemm: gemm += seconds; return;
    case KernelKind::Attention: attention += seconds; return;
    case KernelKind::Membound: membound += seconds; return;
    case KernelKind::TpComm: tp_comm += seconds; return;
  }
}

namespace {

// The layer's kernels summed by module, pass and kind, in the list's order: a module's pass is the
// part before its weights are used, then the rest; the layer's, its modules' in order.
void cost_layer(const KernelList& list, const KernelCosting& c, std::array<ModuleCosts, kLayerModules>& modules,
                LayerCosts& layer) {
  PassCost parts[kLayerModules][3][2] = {};  // [module][phase][pre]
  for (const Kernel& k : list)
    if (k.where == Where::Layer) parts[k.module][int(k.phase)][k.pre ? 1 : 0].add(k.kind, kernel_time(k, list, c));
  layer = {};
  for (int i = 0; i < kLayerModules; ++i) {
    ModuleCosts& m = modules[size_t(i)];
    PassCost* pre[] = {&m.forward_pre, &m.recompute_pre, &m.backward_pre};
    PassCost* whole[] = {&m.forward, &m.recompute, &m.backward};
    PassCost* sum[] = {&layer.forward, &layer.recompute, &layer.backward};
    for (int p = 0; p < 3; ++p) {
      *pre[p] = parts[i][p][1];
      *whole[p] = parts[i][p][1];
      *whole[p] += parts[i][p][0];
      *sum[p] += *whole[p];
    }
  }
}

// The embedding's and the output layer's kernels summed by pass and kind.
EdgeCosts cost_edges(const KernelList& list, const KernelCosting& c) {
  EdgeCosts e;
  for (const Kernel& k : list) {
    if (k.where == Where::Layer) continue;
    const bool forward = k.phase == Phase::Forward;
    PassCost& p = k.where == Where::Embedding ? (forward ? e.embed_forward : e.embed_backward)
                                              : (forward ? e.head_forward : e.head_backward);
    p.add(k.kind, kernel_time(k, list, c));
  }
  return e;
}

// Pipeline sends: b*s*h activations; scatter/gather sends 1/t per rank, then an NVLink all-gather.
void pipeline_sends(CostModel& cm, int per_node) {
  const ParallelConfig& pc = cm.cfg.par;
  const int t = pc.tp;
  // A context-parallel rank sends its own s / c tokens of each sequence.
  cm.act_bytes = double(cm.elem) * (double(pc.micro_batch) * cm.cfg.model.seq_length / pc.cp * cm.cfg.model.hidden);
  // Sequence parallelism sends each rank's own rows: nothing to gather after.
  // DeepSpeed partitions every pipeline tensor over the tensor-parallel group whenever t > 1
  // (PipelineEngine: is_pipe_partitioned = is_grad_partitioned = is_model_parallel), whatever
  // --scatter-gather says.
  const bool sp = pc.sequence_parallel && t > 1;
  const bool sg = (pc.scatter_gather || cm.stack.deepspeed_engine) && t > 1 && !sp;
  cm.send_bytes = sg || sp ? cm.act_bytes / t : cm.act_bytes;
  cm.send_cross = cm.net.p2p(cm.send_bytes, true);
  cm.send_local = cm.net.p2p(cm.send_bytes, false);
  cm.gather = sg ? cm.net.allgather(cm.act_bytes, t, per_node) + cm.hw.launch_overhead_s : 0.0;
  if (!cm.stack.deepspeed_engine) return;
  // A host sync (torch.cuda.synchronize, or .tolist() of a device tensor) empties the GPU's
  // queue: the GPU then idles while the host launches the next kernel.
  cm.host_sync = cm.hw.launch_overhead_s;
  // A partitioned tensor goes as two blocking sends: its meta (a few int64s), then the shard.
  if (sg) {
    cm.meta_cross = cm.net.p2p(64, true);
    cm.meta_local = cm.net.p2p(64, false);
  }
}

}  // namespace

KernelCosting CostModel::costing() const {
  KernelCosting c{hw, net};
  c.peak = peak;
  c.elem = elem;
  c.fp8_peak = hw.peak_fp8;
  c.t = cfg.par.tp;
  // A tensor-parallel group is t consecutive ranks, so where t neither divides a node's G GPUs nor
  // is a multiple of G some groups straddle nodes. Groups start at multiples of t and nodes at
  // multiples of G, so the group with the smallest share of a node has gcd(t, G) ranks there; the
  // slowest group is timed as nodes of that many (t or G where one divides the other).
  c.per_node = std::gcd(c.t, hw.gpus_per_node);
  c.shared_nics = shared_nics();
  // Transformer Engine's reduce-scatters after proj/fc2 ("pipeline") and the backward's bulk
  // all-gather and reduce-scatter run on num_sm = 16 SMs, and set_sm_margin has cuBLASLt run the
  // GEMM beside them on the others (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - 16): the GEMM takes
  // SMs / (SMs - 16) as long (1.14x on 132 SMs). A profile without SMs (a CPU) loses none.
  constexpr double kUbCommSms = 16;
  c.sm_margin = hw.sms > kUbCommSms ? hw.sms / (hw.sms - kUbCommSms) : 1.0;
  // megatron-2022's asynchronous backward collectives are NCCL kernels on a stream of their own,
  // beside a cuBLAS GEMM that knows nothing of them: each of NCCL's channels holds an SM for the
  // collective's whole time, and the GEMM's blocks, scheduled by the hardware as SMs free up, get
  // the rest. Over a collective of time c beside a GEMM of time g (alone), the GEMM loses the SM
  // time c * channels / SMs; if it ends first, the collective's rest is exposed instead:
  // exposed = max(c - g, c * channels / SMs). The cost a GEMM with persistent blocks pays (Hopper;
  // docs/SIMULATOR.md, "Measured: a kernel beside a GEMM") can be larger; the profiles that give
  // nvlink.nccl_channels are the A100 ones. Inside a node only (the channel count is that of
  // NCCL's NVLink rings).
  c.nccl_sm_share =
      hw.sms > 0 && hw.nccl_channels > 0 && c.per_node == c.t ? double(hw.nccl_channels) / hw.sms : 0.0;
  // The context-parallel group: ranks t apart (rank = tp + t (cp + c (dp + d pp))), so G/t of them
  // share a node (one where t >= G); where c and G/t do not divide one another the slowest group
  // has gcd(c, G/t) of its ranks in a node.
  c.cp = cfg.par.cp;
  c.cp_per_node = c.t >= hw.gpus_per_node ? 1 : std::gcd(c.cp, hw.gpus_per_node / c.t);
  return c;
}

PassCost CostModel::pass_cost(Where where, Phase phase) const {
  if (where == Where::Layer)
    return phase == Phase::Forward ? layer.forward : phase == Phase::Recompute ? layer.recompute : layer.backward;
  if (phase == Phase::Recompute) return {};
  const bool forward = phase == Phase::Forward;
  if (where == Where::Embedding) return forward ? edges.embed_forward : edges.embed_backward;
  return forward ? edges.head_forward : edges.head_backward;
}

CostModel::CostModel(const RunConfig& c, const HardwareProfile& profile, const SimOptions& o)
    : hw(profile), net(profile), cfg(c), opt(o), stack(software_stack(c.stack)) {
  const ModelConfig& mc = cfg.model;
  const ParallelConfig& pc = cfg.par;
  peak = hw.peak(cfg.precision);
  if (!(peak > 0))
    usage_error("--precision {}: hardware profile '{}' ({}) has no {} peak", cfg.precision, hw.name, hw.path,
                cfg.precision);
  elem = HardwareProfile::element_bytes(cfg.precision);
  if (cfg.fp8_format != Fp8Format::None && !(hw.peak_fp8 > 0))
    usage_error("--fp8-format {}: hardware profile '{}' ({}) has no FP8 peak (compute.peak_tflops_fp8: Hopper's "
                "tensor cores on); use an H100 or H200 profile, or leave out --fp8-format",
                cfg.fp8_format, hw.name, hw.path);
  knobs = precision_knobs(cfg);
  grad_bytes = stack.grad_bytes > 0 ? stack.grad_bytes : opt.grad_bytes;
  if (knobs.grad_reduce_bf16 && cfg.precision != Precision::F32) grad_bytes = 2;  // --grad-reduce-in-bf16
  const int t = pc.tp;
  tensors = model_tensors(mc, mc.padded_vocab(t));
  params_per_layer = double(tensors.layer_numel(t));
  params_embedding = double(tensors.embedding().numel_per_rank(t));
  gather_elem = elem;
  if (cfg.fp8_param_gather) {
    const double layers = params_per_layer * mc.layers;
    const double rest = double(ModelTensors::sum_numel(tensors.first, t) + ModelTensors::sum_numel(tensors.last, t));
    gather_elem = (layers + rest * elem) / (layers + rest);
  }
  for (const ModelTensor& x : tensors.first)  // gpt's position table; llama: rotary, none
    if (&x != &tensors.embedding()) params_position += double(x.numel_per_rank(t));
  double parts[kLayerModules];
  for (int i = 0; i < kLayerModules; ++i) {
    modules[size_t(i)].weights = double(tensors.module_numel(i, t, false));
    modules[size_t(i)].biases = double(tensors.module_numel(i, t, true));
    parts[i] = modules[size_t(i)].weights + modules[size_t(i)].biases;
  }
  // Weight gradients: Megatron v2.5 accumulates them into the main-gradient buffer (read grad, read
  // and write main_grad: no fused accumulation); DeepSpeed's ZeRO-3 copies each gradient into its
  // reduce bucket (read, write). One pass over the layer's parameters, shared by the modules.
  // Fused accumulation (megatron-2022, mcore, ptdp): the weight-gradient GEMMs add into main_grad
  // themselves, no pass.
  // DeepSpeed's BF16_Optimizer (update_hp_grads, after every micro-batch's backward) adds each
  // bf16 gradient into an fp32 buffer: hp_grad.add_(lp_grad.to(float32)), a cast (read 2, write 4)
  // and an add (read 4 + 4, write 4). Its tied embedding's gradient is that fp32 buffer.
  const bool ds_bf16 = bf16_optimizer(stack, cfg.precision);
  const double E = elem;
  const double grad_bytes_per_param = pc.zero == 3 ? 2 * E : ds_bf16 ? 2 + 4 + 12 : E + 2.0 * grad_bytes;
  tied_grad_bytes = ds_bf16 ? 4 : grad_bytes;

  const LayerShape d = layer_shape(cfg, tensors, elem);
  layer_kernels(kernels, d, stack, cfg);
  if (!stack.fused_grad_accumulation || pc.zero == 3)
    gradient_accumulation(kernels, grad_bytes_per_param * params_per_layer, parts, params_per_layer);
  edge_kernels(kernels, d, stack, {params_embedding, params_position, grad_bytes_per_param});
  const KernelCosting costs = costing();
  cost_layer(kernels, costs, modules, layer);
  edges = cost_edges(kernels, costs);
  pipeline_sends(*this, costs.per_node);

  // Adam on fp32 master weights, per parameter: copy the fp16 gradient to fp32 (2+4), unscale and
  // check for inf (4+4), norm (4), Adam (grad, param, m, v read; param, m, v written: 28), copy
  // the master to fp16 (4+2), zero the gradient buffer (2). f32 training: no copies (4+28+4).
  // The precision-aware optimizer's dtypes scale each term by its tensor's bytes.
  const double mg = knobs.main_grad_bytes, mp = knobs.main_param_bytes;
  const double adam = mg + 2 * (mp + knobs.exp_avg_bytes + knobs.exp_avg_sq_bytes);
  optimizer_bytes_per_param = cfg.precision == Precision::F32 ? 4 + 4 + 28 + 4
                                                              : 2 + mg + 2 * mg + mg + adam + mp + 2 + grad_bytes;
  if (stack.ptdp_kernels) optimizer_bytes_per_param = ptdp_optimizer_bytes_per_param(cfg, knobs, grad_bytes, elem);
}

// ptdp's own step (core/optim/adamw.cpp, the CUDA backend's adamw_multi), per parameter: the
// norm's sum of squares over its f32 gradient (g), one pass of AdamW (gradient, master, m, v read;
// master, m, v and, mixed, the weight in the run's dtype written), and the gradient zeroed before
// the next iteration. 16-bit moments (--use-precision-aware-optimizer) run in f32 copies: each
// widened (its bytes read, 4 written) and rounded back (4 read, its bytes written) around the step.
double ptdp_optimizer_bytes_per_param(const RunConfig& cfg, const PrecisionKnobs& knobs, double g, double elem) {
  const bool mixed = cfg.precision != Precision::F32;
  const double mp = mixed ? knobs.main_param_bytes : elem;
  double bytes = g + g + 2 * (mp + 4 + 4) + (mixed ? elem : 0) + g;
  for (double moment : {knobs.exp_avg_bytes, knobs.exp_avg_sq_bytes})
    if (moment < 4) bytes += 2 * (moment + 4);
  return bytes;
}

int CostModel::node_of_stage(int stage) const {
  const long long first_rank = 1LL * stage * cfg.par.tp * cfg.par.cp * cfg.par.dp;
  return int(first_rank / hw.gpus_per_node);
}

bool CostModel::cross_node(int from_stage, int to_stage) const {
  // Tensor-parallel groups wider than a node always leave it; otherwise compare the nodes.
  if (cfg.par.tp > hw.gpus_per_node) return true;
  return node_of_stage(from_stage) != node_of_stage(to_stage);
}

namespace {
// The ranks that reduce gradients together: the data-parallel group, with context parallelism the
// combined data- and context-parallel group (Megatron-core's), d c ranks.
int grad_group(const ParallelConfig& p) { return p.dp * p.cp; }

// Its peers are t ranks apart (the context-parallel ranks first, then the data-parallel ones):
// gpus_per_node / t of them share a node.
int dp_peers_per_node(const ParallelConfig& p, const HardwareProfile& hw) {
  return p.tp >= hw.gpus_per_node ? 1 : std::min(grad_group(p), hw.gpus_per_node / p.tp);
}

// The data-parallel group of each GPU of node 0 (Megatron's rank order: tensor, data, then
// pipeline ranks; rank r is in group (r mod t, r / (t d))), -1 past the last rank.
std::vector<int> dp_groups_of_node(const ParallelConfig& p, const HardwareProfile& hw) {
  std::vector<int> group_of(size_t(hw.gpus_per_node), -1);
  const long long ranks = 1LL * p.tp * p.dp * p.pp;
  for (int l = 0; l < hw.gpus_per_node && l < ranks; ++l)
    group_of[size_t(l)] = int(l % p.tp + p.tp * (l / (1LL * p.tp * p.dp)));
  return group_of;
}
}  // namespace

// Under NCCL 2.8's NIC choice every data-parallel group of the node runs its collective at once
// (network.h); time the group of rank 0.
bool CostModel::shared_nics() const { return stack.nccl_first_nic_per_switch && hw.pcie_switches > 0; }

double CostModel::dp_allreduce(double params) const {
  if (grad_group(cfg.par) <= 1) return 0;
  if (shared_nics()) return net.allreduce_nccl28(params * grad_bytes, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.allreduce(params * grad_bytes, grad_group(cfg.par), dp_peers_per_node(cfg.par, hw));
}

double CostModel::dp_reduce_scatter(double params) const {
  if (grad_group(cfg.par) <= 1) return 0;
  if (shared_nics()) return net.allgather_nccl28(params * grad_bytes, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.reduce_scatter(params * grad_bytes, grad_group(cfg.par), dp_peers_per_node(cfg.par, hw));
}

double CostModel::exposed_param_gather(double params, double optim, double first_forward) const {
  const double gather = dp_allgather(params);
  if (!stack.param_gather_overlap) return gather;
  const int v = cfg.par.vpp;
  if (!knobs.overlap_param_gather_with_optimizer_step || v < 2)
    return std::max(0.0, gather - first_forward);
  // Megatron-core (optimizer.py ChainedOptimizer._step): the first chunk's optimizer steps alone,
  // then its all-gather starts (start_param_sync(force_dispatch=True)) while the other chunks step;
  // their gathers wait for the forward pre-hooks as under --overlap-param-gather alone.
  const double first = std::max(0.0, gather / v - optim * (v - 1) / v);
  return first + std::max(0.0, gather * (v - 1) / v - first_forward);
}

double CostModel::dp_allgather(double params) const {
  if (grad_group(cfg.par) <= 1) return 0;
  if (shared_nics()) return net.allgather_nccl28(params * gather_elem, cfg.par.dp, dp_groups_of_node(cfg.par, hw), 0);
  return net.allgather(params * gather_elem, grad_group(cfg.par), dp_peers_per_node(cfg.par, hw));
}

double CostModel::dp_reduction(double params) const {
  if (grad_group(cfg.par) <= 1) return 0;
  // --zero 2: this is one backward's reduce-scatter (the simulator queues one per backward).
  if (!stack.deepspeed_engine)
    return cfg.par.zero == 1 || cfg.par.zero == 2 ? dp_reduce_scatter(params) : dp_allreduce(params);
  // DeepSpeed: bucketed all-reduces after the last micro-batch, also under ZeRO-1 with a pipeline
  // (reduce_gradients -> buffered_reduce_fallback) and under BF16_Optimizer, which casts its fp32
  // buffer to bf16 for the wire and back (read 4 write 2, read 2 write 4).
  const double casts = bf16_optimizer(stack, cfg.precision)
                           ? 12 * params / (hw.memory_bw * hw.membound_efficiency) + 2 * hw.launch_overhead_s
                           : 0.0;
  return dp_allreduce(params) + casts;
}

double CostModel::embedding_allreduce() const {
  // llama's output layer is not tied to the embedding: nothing to sum across stages.
  if (cfg.par.pp <= 1 || !cfg.model.tied_embedding()) return 0;
  const bool cross = cross_node(0, cfg.par.pp - 1);
  return net.allreduce(params_embedding * tied_grad_bytes, 2, cross ? 1 : 2);
}

double CostModel::optimizer_step(double params) const {
  return params * optimizer_bytes_per_param / (hw.memory_bw * hw.membound_efficiency) + 20 * hw.launch_overhead_s;
}

double CostModel::model_parallel_sync() const {
  const int mp = cfg.par.tp * cfg.par.pp;
  if (mp <= 1) return 0;
  const bool cross = mp > hw.gpus_per_node;
  // Two all-reduces of one number (found-inf, grad norm): latency only.
  double sync = 2 * net.allreduce(4, mp, cross ? std::min(cfg.par.tp, hw.gpus_per_node) : mp);
  // DeepSpeed's _aggregate_total_loss: the loss all-reduced over the data-parallel group, then
  // broadcast from the last stage to the pipeline's others (a ring of p over nodes).
  if (stack.deepspeed_engine)
    sync += net.allreduce(4, cfg.par.dp, dp_peers_per_node(cfg.par, hw)) + net.allreduce(4, cfg.par.pp, 1) / 2;
  return sync;
}

}  // namespace ptdp::sim
