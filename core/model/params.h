// Where each named parameter lives in a model shard's flat buffer, and how it is initialised
// (Megatron: normal std 0.02, output projections std 0.02/sqrt(2l), biases 0, LayerNorm 1 / 0).
// The tensors, their order and split are the model's tensor inventory (tensor_inventory.h).
#pragma once
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/tensor/tensor.h"

namespace ptdp {

// What part of the model one rank holds: a range of layers (a pipeline stage), whether it has
// the embedding (first stage) and the LM head (last stage), and its tensor-parallel slice.
struct ShardSpec {
  int tp_size = 1, tp_rank = 0;
  int layer_begin = 0, layer_end = -1;  // -1: to the last layer
  bool pre = true;                      // word + position embeddings
  bool post = true;                     // final LayerNorm, output layer (tied to wte) and loss
  // Sequence parallelism (t > 1): activations outside the tensor-parallel regions hold this
  // rank's n/t rows (core/model/layer.h). Changes no parameter.
  bool sequence_parallel = false;
};

struct ParamEntry {
  std::string name;  // e.g. "layers.3.fc.weight"
  Shape shape;       // this rank's part
  int64_t offset = 0;
  Shape full_shape;           // the whole logical tensor
  int split_dim = -1;         // -1: whole (replicated over tensor-parallel ranks); 0: rows; 1: columns
  int64_t split_offset = 0;   // where this rank's part starts along split_dim
  bool tp_replicated = false; // the same values live on every tensor-parallel rank (t > 1)
  bool shared_copy = false;   // the last stage's copy of the tied word embedding (p > 1)
  bool decay = false;      // weight decay applies (matrices, not biases or LayerNorm)
  double init_std = 0;     // > 0: normal(0, init_std)
  double init_value = 0;   // when init_std == 0
};

// The word embedding and llama's output layer: vocabulary rows, padded to a multiple of 128 t.
inline bool has_vocab_rows(const std::string& name) { return name == "wte" || name == "output"; }

class ParamLayout {
 public:
  ParamLayout(const ModelConfig& cfg, const ShardSpec& shard);
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& at(const std::string& name) const;
  const ParamEntry* find(const std::string& name) const;  // null when absent
  Arch arch() const { return arch_; }
  // Index in the logical tensor of element i of this rank's part of e.
  static int64_t logical_index(const ParamEntry& e, int64_t i);
  int64_t total() const { return total_; }

 private:
  // A tensor of logical shape `full`; split_dim >= 0 keeps this rank's 1/t slice along it.
  void add(std::string name, Shape full, int split_dim, bool decay, double std, double value = 0);
  Arch arch_;
  int tp_size_, tp_rank_;
  std::vector<ParamEntry> entries_;
  int64_t total_ = 0;
};

// Fills a flat f32/f64 host buffer with the initial values, from the seed, each parameter's
// name and the element's index in the logical (unsplit) tensor only.
void init_params(const ParamLayout& layout, Tensor& flat, uint64_t seed);

}  // namespace ptdp
