// What the kernel lists are built with (kernels.h): one layer's sizes on one device, an appender
// that stamps each item with its pass, module and op, and the tensor-parallel GEMMs with their
// collectives, which every stack's list shares.
#pragma once
#include "core/config/run_config.h"
#include "core/model/tensor_inventory.h"
#include "core/sim/kernels.h"
#include "core/sim/stack.h"

namespace ptdp::sim {

// One layer, one micro-batch, one device; rows = b s, widths /t.
struct LayerShape {
  double E = 2;  // bytes per element
  double b = 0, s = 0, h = 0, hd = 0, rows = 0, bsh = 0;
  double ht = 0, at = 0, ft = 0;  // h, heads and the MLP width on this device
  // The QKV GEMM's columns on this device (h + 2 g hd) / t, of which the keys and values are
  // kvt = 2 g hd / t (2h/t without query groups).
  double qkvt = 0, kvt = 0;
  double fc_out = 0;  // fc's columns on this device (llama: gate and up, 2f/t)
  double vt = 0;      // the padded vocabulary on this device
  double scores = 0;  // attention score elements on this device: b a/t s s
  int t = 1;
  bool llama = false, gqa = false;
  // Sequence parallelism: the norms, residuals and dropouts work on 1/t of the rows; all-gathers
  // before the column-parallel GEMMs and reduce-scatters after the row-parallel ones replace the
  // all-reduces (the same bytes on the wire: an all-reduce is a reduce-scatter and an all-gather).
  bool sp = false;
  double rowshare = 1;
  // Context parallelism (--context-parallel-size): each rank holds sl = s / cp tokens of every
  // sequence (chunks i and 2cp-1-i of 2cp), so rows = b sl; attention runs over the whole
  // sequence as cp_comm says (cp_kernels.cpp).
  int cp = 1;
  CpComm cp_comm = CpComm::P2P;
  double sl = 0;
  // --fp8-format: the layer's linear GEMMs in FP8 (fp8_kernels.cpp); TE casts the weights on a
  // step's first micro-batch only, so each micro-batch carries weight_cast_share = 1/m of it (half
  // that with --fp8-param-gather: the transpose alone).
  bool fp8 = false;
  double weight_cast_share = 1;
  // --attention-backend cudnn under --stack ptdp: cuDNN's fused attention on q, k and v split from
  // the fused projection (ptdp_kernels.cpp).
  bool cudnn = false;
  // --recompute-activation (--stack ptdp): the MLP's activation rebuilt at the start of backward.
  bool recompute_act = false;
};
LayerShape layer_shape(const RunConfig& cfg, const ModelTensors& tensors, int elem);

// How the stack runs the tensor-parallel collectives beside the GEMMs.
struct TpRules {
  // Transformer Engine pipelines each sequence-parallel collective with the GEMM beside it
  // (userbuffers, its defaults: transformer_engine/pytorch/module/base.py, initialize_ub).
  bool pipelined = false;
  // The backward's collectives run on NCCL's stream beside the GEMMs (megatron-2022 on).
  bool beside_backward = false;
};
TpRules tp_rules(const SoftwareStack& stack, const LayerShape& d);

// Appends kernels of one pass to a list, each stamped with the builder's current place.
struct KernelBuilder {
  KernelList& list;
  Phase phase = Phase::Forward;
  Where where = Where::Layer;
  int module = -1;
  bool pre = false;
  const char* op = nullptr;
  bool fp8 = false;  // GEMMs run in FP8, each with its casts (fp8_kernels.cpp)
  double weight_cast_share = 1;

  // The following kernels run in `module` (before its weights are used when `pre`), in `op`.
  KernelBuilder& in(int m, bool before_weights = false, const char* backend_op = nullptr) {
    module = m;
    pre = before_weights;
    op = backend_op;
    return *this;
  }
  KernelBuilder& run_in(const char* backend_op) {
    op = backend_op;
    return *this;
  }
  int gemm(const char* name, double m, double n, double k, const char* detail = nullptr);  // its index
  void attention(const char* name, double m, double n, double k, double batch);
  void membound(const char* name, double bytes, int calls = 1);  // calls: of the op, each a launch
  void collective(const char* name, Collective c, double bytes, Overlap o = Overlap::None, int gemm = -1,
                  const char* detail = nullptr);
  // A collective of the context-parallel group; UnderKernels: under the `span` kernels from `first`.
  void cp_collective(const char* name, Collective c, double bytes, Overlap o = Overlap::None, int first = -1,
                     int span = 1);

 private:
  Kernel& add(const char* name, KernelKind kind);
};

// Column-parallel Y[rows, n] = X[rows, h] W, sequence parallelism's all-gather of X before it.
void column_forward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double n);
// Row-parallel Y[rows, h] = X[rows, k] W, its partial outputs summed over the group after it.
void row_forward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double k);
// Their backward: the input- and weight-gradient GEMMs and the collectives beside them.
void column_backward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double n);
void row_backward(KernelBuilder& x, const LayerShape& d, const TpRules& r, const char* name, double k);

// One layer's kernels, forward, recomputation (cfg's mode) and backward, as the stack runs them.
void layer_kernels(KernelList& list, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg);
// The weight gradients added into the main-gradient buffer after each module's backward: one pass
// of `bytes` over the layer's `whole` parameters, each module's `part` of it.
void gradient_accumulation(KernelList& list, double bytes, const double (&part)[kLayerModules], double whole);

// What the embedding's and the output layer's kernels need beyond the shape: the parameters on
// this device and the bytes a parameter's gradient moves into the main-gradient buffer.
struct EdgeParams {
  double embedding = 0, position = 0;  // the word embedding's shard, the position table (gpt)
  double grad_bytes_per_param = 0;
};
void edge_kernels(KernelList& list, const LayerShape& d, const SoftwareStack& stack, const EdgeParams& p);

// FP8 (--fp8-format, fp8_kernels.cpp): the casts to FP8 before a linear GEMM `g` of the list (its
// input, and in the forward its weight, each with the transposed copy the backward needs), and the
// layer's amax history and scale update of one pass.
void fp8_casts(KernelBuilder& x, const Kernel& g);
void fp8_amax_update(KernelBuilder& x);

// Megatron's layer (layer_kernels.cpp) and ptdp's (ptdp_kernels.cpp), one pass; `core_only`:
// selective recomputation's attention core alone.
void megatron_layer_forward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg,
                            bool core_only);
void megatron_layer_backward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg);
// The attention core under context parallelism (cp_kernels.cpp), flash attention's blocks with the
// context-parallel group's communication: the p2p ring, the a2a exchanges or the all-gather.
void cp_attention_forward(KernelBuilder& x, const LayerShape& d);
void cp_attention_backward(KernelBuilder& x, const LayerShape& d);
void ptdp_layer_forward(KernelBuilder& x, const LayerShape& d, bool core_only);
void ptdp_layer_backward(KernelBuilder& x, const LayerShape& d);

}  // namespace ptdp::sim
