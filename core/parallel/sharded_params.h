// ZeRO-3's parameter store (DeepSpeed stage 3 semantics): every unit of the model (param_units)
// is split over the data-parallel group, each rank holding its chunk_range of the unit's
// parameters and of its summed gradients. A unit is all-gathered when the model asks for it
// (forward, and again for backward with its recomputation) and freed after its last release;
// its gradients are reduce-scattered into the shards as soon as its backward pass is done.
#pragma once
#include <map>
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/model/param_source.h"

namespace ptdp {

class ShardedParams final : public ParamSource {
 public:
  // full: the whole model's (initialised) parameters, laid out as `units` cover them; grad_dtype:
  // the dtype gradients accumulate in. dp may be null (one rank).
  ShardedParams(Backend& be, std::vector<FlatRange> units, const Tensor& full, DType grad_dtype, Communicator* dp);

  Tensor& params() { return params_; }  // this rank's pieces, unit after unit
  Tensor& grads() { return grads_; }
  const std::vector<FlatRange>& owned() const { return owned_; }  // the pieces, as ranges of the layout
  void zero_grads();
  // Every rank's pieces of a compact tensor laid out as params() into `full` (the whole layout).
  void gather_all(const Tensor& compact, Tensor& full);
  int64_t gathered_bytes() const { return gathered_bytes_; }            // gathered now
  int64_t peak_gathered_bytes() const { return peak_gathered_bytes_; }  // the most at once

  Tensor gather(int unit) override;
  void release(int unit) override;
  Tensor grad_buffer(int unit) override;
  void reduce(int unit) override;

 private:
  FlatRange piece(int unit) const;  // this rank's part of the unit, as a range of the layout
  int64_t at(int unit) const { return at_[unit]; }
  void count(int64_t bytes);
  Backend& be_;
  std::vector<FlatRange> units_;
  Communicator* dp_;
  std::vector<FlatRange> owned_;
  std::vector<int64_t> at_;  // where each unit's piece starts in params_/grads_
  Tensor params_, grads_;
  struct Gathered {
    Tensor t;
    int users = 0;
  };
  std::map<int, Gathered> gathered_;
  std::map<int, Tensor> grad_buffers_;
  int64_t gathered_bytes_ = 0, peak_gathered_bytes_ = 0;
};

}  // namespace ptdp
