// Activations and their gradients between pipeline stages. With scatter/gather (t > 1) each
// tensor-parallel rank sends only its 1/t slice to the same tensor-parallel rank of the peer
// stage, which all-gathers the slices over its tensor-parallel group; without it every rank
// sends the whole tensor.
#pragma once
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"

namespace ptdp {

class StageLink {
 public:
  // pp: this pipeline's group (rank = stage); tp: the tensor-parallel group (may be null);
  // be: where received tensors are allocated (null: host memory).
  StageLink(Communicator* pp, Communicator* tp, bool scatter_gather, Backend* be = nullptr);
  // Posts the send of x to `stage`; x (or the slice sent) stays referenced until wait_sends().
  void send(const Tensor& x, int stage, int tag);
  // Receives a tensor of `shape` from `stage` (blocking, then all-gathers with scatter/gather).
  Tensor recv(const Shape& shape, DType dtype, int stage, int tag);
  void wait_sends();

  int64_t bytes_sent() const { return bytes_sent_; }
  double wait_ms() const { return wait_ms_; }  // time blocked in receives
  void reset_counters();

 private:
  bool sliced() const { return scatter_gather_ && tp_ && tp_->size() > 1; }
  Tensor alloc(const Shape& shape, DType dtype) const;
  Communicator* pp_;
  Communicator* tp_;
  bool scatter_gather_;
  Backend* be_;
  std::vector<std::pair<Tensor, CommHandle>> pending_;
  int64_t bytes_sent_ = 0;
  double wait_ms_ = 0;
};

}  // namespace ptdp
