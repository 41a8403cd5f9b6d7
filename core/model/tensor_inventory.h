// The model's parameter tensors as one table (llm.c's fill_in_parameter_sizes): each tensor's name,
// whole shape, tensor-parallel split, the layer module that owns it and its kind. The parameter
// layout (params.h), the FLOP and parameter accounting, the memory estimate and the simulator's
// parameter counts, module weights and ZeRO-3 modules are all counted from it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/tensor/tensor.h"

namespace ptdp {

// The four parts of a layer that own a weight matrix (what ZeRO-3 gathers one at a time), each
// with the norm that feeds it: qkv (LayerNorm 1), proj (LayerNorm 2), fc (llama: gate and up), fc2
// (llama: down).
enum LayerModule { kModuleQkv = 0, kModuleProj, kModuleFc, kModuleFc2, kLayerModules };
const char* layer_module_name(int module);  // "qkv", "proj", "fc", "fc2"; "-" outside a layer

enum class TensorKind { Matrix, Bias, Norm };  // Norm: a LayerNorm's weight or bias, an RMSNorm's weight
enum class TensorInit { Normal, ScaledNormal, One, Zero };  // ScaledNormal: output projections, std/sqrt(2l)

struct ModelTensor {
  std::string name;    // "wte", "lnf.weight"; a layer's without its "layers.L." prefix: "qkv.weight"
  Shape shape;         // the whole tensor
  int split_dim = -1;  // tensor parallelism: -1 replicated, 0 rows (column- and vocab-parallel), 1 columns (row-parallel)
  int module = -1;     // the LayerModule owning a layer's tensor; -1 outside the layers
  TensorKind kind = TensorKind::Matrix;
  TensorInit init = TensorInit::Normal;
  int64_t numel() const { return shape_numel(shape); }
  // Elements on one of t tensor-parallel ranks (t divides the split dimension).
  int64_t numel_per_rank(int t) const { return split_dim < 0 ? numel() : numel() / t; }
  bool small() const { return kind != TensorKind::Matrix; }  // biases and norms: no weight decay
};

struct ModelTensors {
  // In the flat buffer's order. gpt: wte, wpe | ln1, qkv, proj, ln2, fc, fc2 (weights and biases) |
  // lnf; llama: wte | ln1, qkv, proj, ln2, gate, up, down (weights) | lnf, output.
  std::vector<ModelTensor> first;  // the first stage's, before the layers
  std::vector<ModelTensor> layer;  // one layer's
  std::vector<ModelTensor> last;   // the last stage's, after the layers
  int layers = 0;
  bool tied = false;               // gpt: the output layer is wte, of which the last stage holds a copy (p > 1)

  // Elements on one of t tensor-parallel ranks: of one layer, of one module of a layer (its
  // matrices, or its biases and norms), of the first and last stage's own tensors.
  int64_t layer_numel(int t) const;
  int64_t module_numel(int module, int t, bool small) const;
  static int64_t sum_numel(const std::vector<ModelTensor>& tensors, int t);
  // The whole model's elements, every layer (one copy of a tied embedding).
  int64_t total() const;
  // A module's tensors as DeepSpeed registers them: its matrix and bias, then its norm.
  std::vector<const ModelTensor*> module_tensors(int module) const;
  // The word embedding and the output layer's matrix (gpt: both wte).
  const ModelTensor& embedding() const { return first.front(); }
  const ModelTensor& output() const { return tied ? first.front() : last.back(); }
};

// The tensors of `c` with `vocab_rows` rows in the embedding and output layer (the padded
// vocabulary, padded_vocab(t), for a layout; the vocabulary itself for the model's own size).
ModelTensors model_tensors(const ModelConfig& c, int64_t vocab_rows);

// One module's GEMM on one of t tensor-parallel ranks: its matrices stacked along their rows
// (llama's gate and up: one GEMM of 2f outputs), `out` x `in` after the split.
struct ModuleGemm {
  int64_t out = 0, in = 0;
};
ModuleGemm module_gemm(const ModelTensors& m, int module, int t);
ModuleGemm logits_gemm(const ModelTensors& m, int t);  // the output layer's

}  // namespace ptdp
