// --stack ptdp: the simulator's kernel list of one layer is what ptdp's CUDA backend runs. One
// layer's forward, then its recomputation and backward, run on the CUDA backend with its op profile
// on (PTDP_OP_PROFILE); every op the profile records is an op of the list with as many calls (the
// list's consecutive kernels of one op are one call), the GEMM ops do the list's FLOPs, and the
// memory-bound ops move its bytes (the norms' backward but for their column-sum partials). With
// --attention-backend cudnn the list's block attention path is what the backend runs on the block
// path, ptdp's flash kernel standing in for cuDNN's (the virtual GPU has no cuDNN).
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <unistd.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/testing/op_profile_rows.h"
#include "core/backend/cuda/device_info.h"
#include "core/model/context_attention.h"
#include "core/model/layer.h"
#include "core/model/params.h"
#include "core/sim/kernel_builder.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;

struct OpSums {
  long calls = 0;
  double flops = 0, bytes = 0;
  bool gemm = false;  // the op runs a GEMM (its FLOPs are the GEMMs')
};
using OpCalls = std::map<std::string, OpSums>;

// The backend ops of `phases` in the list: consecutive kernels of one op are one call.
OpCalls ops_of_list(const sim::KernelList& list, std::initializer_list<sim::Phase> phases) {
  OpCalls ops;
  const sim::Kernel* prev = nullptr;
  for (const sim::Kernel& k : list) {
    if (std::find(phases.begin(), phases.end(), k.phase) == phases.end() || k.where != sim::Where::Layer) continue;
    EXPECT_TRUE(k.op != nullptr || k.kind == sim::KernelKind::TpComm) << k.name << ": a kernel of no op";
    const bool same_call = prev && prev->op && k.op && std::string(prev->op) == k.op && prev->phase == k.phase;
    prev = &k;
    if (k.op == nullptr) continue;
    OpSums& o = ops[k.op];
    o.calls += same_call ? k.calls - 1 : k.calls;
    const bool gemm = k.kind == sim::KernelKind::Gemm || k.kind == sim::KernelKind::Attention;
    o.gemm = o.gemm || gemm;
    o.flops += gemm ? k.flops() : 0;
    o.bytes += k.kind == sim::KernelKind::Membound ? k.bytes : 0;
  }
  return ops;
}

OpCalls profile_ops(const fs::path& path) {
  OpCalls ops;
  for (const auto& [op, r] : testing::read_op_profile(path.string()))
    ops[op] = OpSums{r.calls, r.gflop * 1e9, r.gbyte * 1e9};
  return ops;
}

LayerDims one_rank_dims(const ModelConfig& c, int b, Backend& be, bool block) {
  LayerDims d;
  d.block = block;
  d.b = b;
  d.s = c.seq_length;
  d.h = c.hidden;
  d.heads = c.heads;
  d.groups = c.groups();
  d.hd = c.head_dim();
  d.ffn = c.ffn_hidden();
  d.eps = c.layernorm_eps;
  d.llama = c.arch == Arch::Llama;
  d.rope_theta = c.rope_theta;
  if (block && d.llama) {
    const Tensor host = cp_positions(b, d.s, d.cp);
    d.positions = be.empty(host.shape(), host.dtype());
    be.copy(d.positions, host);
  }
  return d;
}

// The ops the backend's profile records for one layer's forward (`backward` false) or for its
// recomputation and backward after the forward (true), f32, one rank; `block`: on the block
// attention path, ptdp's flash kernel's ops named as cuDNN's.
OpCalls ops_the_backend_ran(const ModelConfig& c, int b, Recompute mode, bool backward, bool block = false) {
  const fs::path path =
      fs::temp_directory_path() / ("ptdp_stack_ops_" + std::to_string(::getpid()) + (backward ? "_b" : "_f") + ".csv");
  fs::remove(path);
  ::setenv("PTDP_OP_PROFILE", path.c_str(), 1);
  {
    auto gpu = make_cuda_backend(0);
    const ParamLayout layout(c, ShardSpec{});
    Tensor host = Tensor::empty({layout.total()}, DType::F32);
    init_params(layout, host, 7);
    Tensor w = gpu->empty({layout.total()}, DType::F32), g = gpu->empty({layout.total()}, DType::F32);
    gpu->copy(w, host);
    gpu->fill(g, 0);
    const LayerDims d = one_rank_dims(c, b, *gpu, block);
    const LayerWeights wv = LayerWeights::view(w, layout, 0);
    LayerWeights gv = LayerWeights::view(g, layout, 0);
    Tensor x = gpu->empty({d.rows(), d.h}, DType::F32), y = gpu->empty({d.rows(), d.h}, DType::F32);
    Tensor dy = gpu->empty({d.rows(), d.h}, DType::F32), dx = gpu->empty({d.rows(), d.h}, DType::F32);
    gpu->fill(x, 0.5);
    gpu->fill(dy, 0.25);
    LayerCache cache;
    gpu->profile_restart();  // the set-up above is not the layer's
    layer_forward(*gpu, d, wv, x, y, cache, mode);
    if (backward) {
      gpu->profile_restart();
      layer_backward(*gpu, d, wv, gv, cache, dy, dx, mode);
    }
    gpu->synchronize();
  }
  ::unsetenv("PTDP_OP_PROFILE");
  OpCalls ops = profile_ops(path);
  fs::remove(path);
  for (const char* pass : {"forward", "backward"}) {
    const auto it = ops.find(std::string("flash_attention_") + pass);
    if (!block || it == ops.end()) continue;
    ops[std::string("cudnn_attention_") + pass] = it->second;
    ops.erase(it);
  }
  // ptdp's kernel accumulates: the block's dq, dk and dv are zeroed for it first; cuDNN writes them.
  if (const auto fill = ops.find("fill"); block && backward && fill != ops.end()) {
    const double grads = 4.0 * b * c.seq_length * (c.heads + 2 * c.groups()) * c.head_dim();  // f32
    EXPECT_EQ(fill->second.calls, 3);
    EXPECT_DOUBLE_EQ(fill->second.bytes, grads);
    ops.erase(fill);
  }
  return ops;
}

// `kernel_flops`: the list's FLOPs of the attention ops are another kernel's (cuDNN's, where the
// backend ran ptdp's flash kernel): not compared.
void expect_same_ops(const OpCalls& list, const OpCalls& profile, const std::string& what, bool kernel_flops = false) {
  for (const auto& [op, p] : profile) {
    const auto it = list.find(op);
    if (it == list.end()) {
      ADD_FAILURE() << what << ": the backend ran " << op << " (" << p.calls << " calls), the kernel list has no such op";
      continue;
    }
    const OpSums& l = it->second;
    EXPECT_EQ(l.calls, p.calls) << what << ": " << op;
    if (l.gemm && !(kernel_flops && op.find("attention") != std::string::npos)) {
      EXPECT_NEAR(l.flops, p.flops, 1e-8 * p.flops) << what << ": " << op << "'s FLOPs";
    }
    const bool partials = op == "layernorm_backward" || op == "rmsnorm_backward";  // column-sum partials left out
    if (!l.gemm && !partials) {
      EXPECT_NEAR(l.bytes, p.bytes, 1e-8 * p.bytes) << what << ": " << op << "'s bytes";
    }
  }
  for (const auto& [op, l] : list)
    EXPECT_EQ(profile.count(op), 1u) << what << ": the kernel list has " << op << ", the backend ran none";
}

ModelConfig stack_test_model(Arch arch, int groups) {
  ModelConfig c;
  c.name = "stack-test";
  c.arch = arch;
  c.layers = 1;
  c.hidden = 64;
  c.heads = 4;
  c.query_groups = groups;
  c.seq_length = 16;
  c.vocab_size = 256;
  return c;
}

// The list of one layer of `c` under --stack ptdp, f32, micro-batch b.
sim::KernelList stack_list(const ModelConfig& c, int b, Recompute mode, AttentionBackend attention) {
  RunConfig cfg;
  cfg.model = c;
  cfg.par.micro_batch = b;
  cfg.par.recompute = mode;
  cfg.precision = Precision::F32;
  cfg.stack = StackKind::Ptdp;
  cfg.attention_backend = attention;
  sim::KernelList list;
  sim::layer_kernels(list, sim::layer_shape(cfg, model_tensors(c, c.padded_vocab(1)), 4),
                     sim::software_stack(StackKind::Ptdp), cfg);
  return list;
}

TEST(CudaPtdpStack, TheKernelListOfALayerIsTheOpsTheCudaBackendRuns) {
  std::string reason;
  if (cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
  const int b = 2;
  for (const ModelConfig& c : {stack_test_model(Arch::Gpt, 0), stack_test_model(Arch::Gpt, 2), stack_test_model(Arch::Llama, 0),
                               stack_test_model(Arch::Llama, 2)})
    for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const sim::KernelList list = stack_list(c, b, mode, AttentionBackend::Auto);
      const std::string what = std::string(enum_name(c.arch)) + (c.gqa() ? " gqa " : " ") + std::string(enum_name(mode));
      expect_same_ops(ops_of_list(list, {sim::Phase::Forward}), ops_the_backend_ran(c, b, mode, false), what + " forward");
      expect_same_ops(ops_of_list(list, {sim::Phase::Recompute, sim::Phase::Backward}), ops_the_backend_ran(c, b, mode, true),
                      what + " backward");
    }
}

// --attention-backend cudnn: the split, the rotation at each row's position, the zeroed and joined
// gradients are the ops and bytes the backend's block path runs; the attention op is called as
// often (its FLOPs are cuDNN's: the products over the causal half, five in the backward).
TEST(CudaPtdpStack, TheCudnnKernelListIsTheBlockPathTheCudaBackendRuns) {
  std::string reason;
  if (cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
  const int b = 2;
  for (const ModelConfig& c : {stack_test_model(Arch::Gpt, 0), stack_test_model(Arch::Llama, 2)})
    for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const sim::KernelList list = stack_list(c, b, mode, AttentionBackend::Cudnn);
      const std::string what = std::string(enum_name(c.arch)) + " cudnn " + std::string(enum_name(mode));
      const OpCalls fwd = ops_of_list(list, {sim::Phase::Forward});
      expect_same_ops(fwd, ops_the_backend_ran(c, b, mode, false, true), what + " forward", true);
      expect_same_ops(ops_of_list(list, {sim::Phase::Recompute, sim::Phase::Backward}),
                      ops_the_backend_ran(c, b, mode, true, true), what + " backward", true);
      // Forward: 2 products of s s hd over the causal half of b a (s s) pairs.
      const double s = c.seq_length, hd = c.head_dim();
      EXPECT_DOUBLE_EQ(fwd.at("cudnn_attention_forward").flops, 2 * 2 * s * s * hd * b * c.heads / 2.0) << what;
    }
}

}  // namespace
}  // namespace ptdp
#endif
