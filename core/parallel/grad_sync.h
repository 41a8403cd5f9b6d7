// Data-parallel gradient reduction: the flat gradient buffer is cut into buckets in backprop
// order (from the end of the buffer to its start) and each bucket is summed over the DP group.
// With overlap, a bucket's all-reduce starts as soon as the backward pass has finished every
// gradient in it, while the rest of the backward pass runs.
#pragma once
#include <vector>

#include "core/comm/communicator.h"

namespace ptdp {

class GradSync {
 public:
  // bucket_elems: elements per bucket (Megatron's default bucket is 40M elements).
  GradSync(Tensor grads, Communicator* dp, int64_t bucket_elems, bool overlap);
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

  void begin();                  // before the backward pass of the last micro-batch
  void ready_from(int64_t off);  // gradients [off, end) are final: launch the buckets inside
  void finish();                 // launches what is left and waits for every bucket

 private:
  struct Bucket {
    int64_t begin, end;
    bool launched = false;
    CommHandle handle;
  };
  void launch(Bucket& b);
  Tensor grads_;
  Communicator* dp_;
  bool overlap_;
  std::vector<Bucket> buckets_;  // in backprop order: the last part of the buffer first
};

}  // namespace ptdp
