#include "core/model/tensor_inventory.h"

#include "core/common/error.h"

namespace ptdp {

const char* layer_module_name(int module) {
  switch (module) {
    case kModuleQkv: return "qkv";
    case kModuleProj: return "proj";
    case kModuleFc: return "fc";
    case kModuleFc2: return "fc2";
    default: return "-";
  }
}

namespace {

using K = TensorKind;
using I = TensorInit;

// GPT: per layer pre-LayerNorm, QKV (column-parallel: whole heads, or whole query groups, per
// rank), proj (row-parallel), LayerNorm, fc (column-parallel), fc2 (row-parallel), each with a
// bias; the row-parallel biases are whole on every rank.
std::vector<ModelTensor> gpt_layer(int64_t h, int64_t qkv, int64_t f) {
  return {{"ln1.weight", {h}, -1, kModuleQkv, K::Norm, I::One},
          {"ln1.bias", {h}, -1, kModuleQkv, K::Norm, I::Zero},
          {"qkv.weight", {qkv, h}, 0, kModuleQkv, K::Matrix, I::Normal},
          {"qkv.bias", {qkv}, 0, kModuleQkv, K::Bias, I::Zero},
          {"proj.weight", {h, h}, 1, kModuleProj, K::Matrix, I::ScaledNormal},
          {"proj.bias", {h}, -1, kModuleProj, K::Bias, I::Zero},
          {"ln2.weight", {h}, -1, kModuleProj, K::Norm, I::One},
          {"ln2.bias", {h}, -1, kModuleProj, K::Norm, I::Zero},
          {"fc.weight", {f, h}, 0, kModuleFc, K::Matrix, I::Normal},
          {"fc.bias", {f}, 0, kModuleFc, K::Bias, I::Zero},
          {"fc2.weight", {h, f}, 1, kModuleFc2, K::Matrix, I::ScaledNormal},
          {"fc2.bias", {h}, -1, kModuleFc2, K::Bias, I::Zero}};
}

// LLaMA: RMSNorm weights only, no biases; the SwiGLU MLP's gate and up column-parallel and
// adjacent (each rank's slices form one [2f/t, h] matrix: one GEMM), down row-parallel.
std::vector<ModelTensor> llama_layer(int64_t h, int64_t qkv, int64_t f) {
  return {{"ln1.weight", {h}, -1, kModuleQkv, K::Norm, I::One},
          {"qkv.weight", {qkv, h}, 0, kModuleQkv, K::Matrix, I::Normal},
          {"proj.weight", {h, h}, 1, kModuleProj, K::Matrix, I::ScaledNormal},
          {"ln2.weight", {h}, -1, kModuleProj, K::Norm, I::One},
          {"gate.weight", {f, h}, 0, kModuleFc, K::Matrix, I::Normal},
          {"up.weight", {f, h}, 0, kModuleFc, K::Matrix, I::Normal},
          {"down.weight", {h, f}, 1, kModuleFc2, K::Matrix, I::ScaledNormal}};
}

}  // namespace

ModelTensors model_tensors(const ModelConfig& c, int64_t vocab_rows) {
  const int64_t h = c.hidden, qkv = c.qkv_width(), f = c.ffn_hidden();
  ModelTensors m;
  m.layers = c.layers;
  if (c.arch == Arch::Llama) {
    m.first = {{"wte", {vocab_rows, h}, 0, -1, K::Matrix, I::Normal}};  // vocab-parallel
    m.layer = llama_layer(h, qkv, f);
    m.last = {{"lnf.weight", {h}, -1, -1, K::Norm, I::One}, {"output", {vocab_rows, h}, 0, -1, K::Matrix, I::Normal}};
    return m;
  }
  m.tied = true;
  m.first = {{"wte", {vocab_rows, h}, 0, -1, K::Matrix, I::Normal},
             {"wpe", {c.seq_length, h}, -1, -1, K::Matrix, I::Normal}};
  m.layer = gpt_layer(h, qkv, f);
  m.last = {{"lnf.weight", {h}, -1, -1, K::Norm, I::One}, {"lnf.bias", {h}, -1, -1, K::Norm, I::Zero}};
  return m;
}

int64_t ModelTensors::sum_numel(const std::vector<ModelTensor>& tensors, int t) {
  int64_t n = 0;
  for (const ModelTensor& x : tensors) n += x.numel_per_rank(t);
  return n;
}

int64_t ModelTensors::layer_numel(int t) const { return sum_numel(layer, t); }

int64_t ModelTensors::module_numel(int module, int t, bool small) const {
  int64_t n = 0;
  for (const ModelTensor& x : layer)
    if (x.module == module && x.small() == small) n += x.numel_per_rank(t);
  return n;
}

int64_t ModelTensors::total() const { return sum_numel(first, 1) + layers * layer_numel(1) + sum_numel(last, 1); }

std::vector<const ModelTensor*> ModelTensors::module_tensors(int module) const {
  std::vector<const ModelTensor*> out;
  for (bool norm : {false, true})
    for (const ModelTensor& x : layer)
      if (x.module == module && (x.kind == TensorKind::Norm) == norm) out.push_back(&x);
  return out;
}

namespace {
ModuleGemm stacked_gemm(const std::vector<const ModelTensor*>& matrices, int t) {
  PTDP_CHECK(!matrices.empty(), "a module without a matrix");
  ModuleGemm g{0, matrices.front()->shape[1]};
  for (const ModelTensor* x : matrices) g.out += x->shape[0];
  if (matrices.front()->split_dim == 0) g.out /= t;
  if (matrices.front()->split_dim == 1) g.in /= t;
  return g;
}
}  // namespace

ModuleGemm module_gemm(const ModelTensors& m, int module, int t) {
  std::vector<const ModelTensor*> matrices;
  for (const ModelTensor& x : m.layer)
    if (x.module == module && x.kind == TensorKind::Matrix) matrices.push_back(&x);
  return stacked_gemm(matrices, t);
}

ModuleGemm logits_gemm(const ModelTensors& m, int t) { return stacked_gemm({&m.output()}, t); }

}  // namespace ptdp
