#include "core/parallel/stage_link.h"

#include <chrono>

namespace ptdp {

StageLink::StageLink(Communicator* pp, Communicator* tp, bool scatter_gather, Backend* be)
    : pp_(pp), tp_(tp), scatter_gather_(scatter_gather), be_(be) {}

Tensor StageLink::alloc(const Shape& shape, DType dtype) const {
  return be_ ? be_->empty(shape, dtype) : Tensor::empty(shape, dtype);
}

void StageLink::send(const Tensor& x, int stage, int tag) {
  Tensor part = x;
  if (sliced()) {
    ChunkRange c = chunk_range(x.numel(), tp_->size(), tp_->rank());
    part = x.view(c.begin, {c.size()});
  }
  bytes_sent_ += static_cast<int64_t>(part.nbytes());
  pending_.push_back({part, pp_->isend(part, stage, tag)});
}

Tensor StageLink::recv(const Shape& shape, DType dtype, int stage, int tag) {
  const auto t0 = std::chrono::steady_clock::now();
  Tensor full = alloc(shape, dtype);
  if (sliced()) {
    ChunkRange c = chunk_range(full.numel(), tp_->size(), tp_->rank());
    Tensor part = alloc({c.size()}, dtype);
    pp_->recv(part, stage, tag);
    Tensor flat = full.reshape({full.numel()});
    tp_->all_gather(part, flat);
  } else {
    pp_->recv(full, stage, tag);
  }
  wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return full;
}

void StageLink::wait_sends() {
  for (auto& [t, h] : pending_) h.wait();
  pending_.clear();
}

void StageLink::reset_counters() {
  bytes_sent_ = 0;
  wait_ms_ = 0;
}

}  // namespace ptdp
