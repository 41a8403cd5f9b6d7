// Data-parallel gradient reduction: the flat gradient buffer is cut into buckets in backprop
// order (from the end of the buffer to its start) and each bucket is summed over the DP group.
// With overlap, a bucket's reduction starts as soon as the backward pass has finished every
// gradient in it, while the rest of the backward pass runs.
//
// Sharded (the distributed optimizer, --zero 1): each bucket is reduce-scattered instead of
// all-reduced, so this rank ends with the sum of its chunk_range of every bucket only (its
// `owned()` pieces, which its optimizer updates); gather_params() then all-gathers the updated
// parameters of every bucket from their owners.
//
// In bf16 (--grad-reduce-in-bf16): each bucket is rounded to bf16, reduced in bf16 by the
// communicator (CPU ranks: summed in f32 in rank order and rounded once; NCCL: its ring, rounding
// at each step) and widened back into the f32 buffer.
#pragma once
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/common/flat_range.h"

namespace ptdp {

class GradSync {
 public:
  // bucket_elems: elements per bucket (Megatron's default bucket is 40M elements).
  GradSync(Backend& be, Tensor grads, Communicator* dp, int64_t bucket_elems, bool overlap, bool sharded = false,
           bool reduce_bf16 = false);
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

  // Buckets touching [begin, end) are never launched during backward (the tied embedding's
  // gradient, which must first be summed with its copy on the other end of the pipeline).
  void hold(int64_t begin, int64_t end) { held_ = {begin, end}; }
  void begin();                  // before the backward pass of the last micro-batch
  void ready_from(int64_t off);  // gradients [off, end) are final: launch the buckets inside
  void finish();                 // launches what is left and waits for every bucket

  // The parts of the buffer whose reduced gradients this rank holds after finish(), in
  // ascending order: the whole buffer, or (sharded) one chunk of every bucket.
  const std::vector<FlatRange>& owned() const { return owned_; }
  // Sharded: every rank's owned pieces of `params` (laid out as the gradients) to every rank.
  void gather_params(Tensor& params);

 private:
  struct Bucket {
    int64_t begin, end;
    bool launched = false;
    CommHandle handle;
    Tensor reduced;  // sharded: this rank's reduced chunk, until it is copied back
    Tensor narrow;   // in bf16: the bucket's bf16 copy, reduced in place (not sharded)
  };
  void launch(Bucket& b);
  FlatRange mine(const Bucket& b) const;
  Backend& be_;
  Tensor grads_;
  Communicator* dp_;
  bool overlap_, sharded_, bf16_;
  FlatRange held_{0, 0};
  std::vector<Bucket> buckets_;  // in backprop order: the last part of the buffer first
  std::vector<FlatRange> owned_;
};

}  // namespace ptdp
