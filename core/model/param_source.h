// Where a model whose parameters are sharded over the data-parallel group (ZeRO-3) finds the
// parameters of one unit while it runs (the embedding, a layer, the final LayerNorm), and where
// that unit's gradients go. Units are whole: gathered before use, released after.
#pragma once
#include <vector>

#include "core/common/flat_range.h"
#include "core/model/params.h"
#include "core/tensor/tensor.h"

namespace ptdp {

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual Tensor gather(int unit) = 0;       // the unit's parameters, whole, valid until release
  virtual void release(int unit) = 0;        // one release per gather
  virtual Tensor grad_buffer(int unit) = 0;  // the unit's gradients, whole, zeroed at first use
  virtual void reduce(int unit) = 0;         // sums the buffer over the group into the shards, frees it
};

// The units of a whole model (one rank holds every layer, t = 1): the embedding (word and
// position), each layer, the final LayerNorm; ranges of the layout.
std::vector<FlatRange> param_units(const ParamLayout& layout, int layers);

}  // namespace ptdp
