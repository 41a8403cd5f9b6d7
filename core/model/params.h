// Where each named parameter lives in a model shard's flat buffer, and how it is initialised
// (Megatron: normal std 0.02, output projections std 0.02/sqrt(2l), biases 0, LayerNorm 1 / 0).
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
};

struct ParamEntry {
  std::string name;  // e.g. "layers.3.fc.weight"
  Shape shape;
  int64_t offset = 0;
  bool decay = false;      // weight decay applies (matrices, not biases or LayerNorm)
  double init_std = 0;     // > 0: normal(0, init_std)
  double init_value = 0;   // when init_std == 0
};

class ParamLayout {
 public:
  ParamLayout(const ModelConfig& cfg, const ShardSpec& shard);
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& at(const std::string& name) const;
  int64_t total() const { return total_; }

 private:
  void add(std::string name, Shape shape, bool decay, double std, double value = 0);
  std::vector<ParamEntry> entries_;
  int64_t total_ = 0;
};

// Fills a flat f32/f64 host buffer with the initial values, from the seed and each parameter's
// name and element index only.
void init_params(const ParamLayout& layout, Tensor& flat, uint64_t seed);

}  // namespace ptdp
