#include "core/parallel/sharded_params.h"

#include <algorithm>

#include "core/parallel/all_gather_piece.h"

namespace ptdp {

ShardedParams::ShardedParams(Backend& be, std::vector<FlatRange> units, const Tensor& full, DType grad_dtype,
                             Communicator* dp)
    : be_(be), units_(std::move(units)), dp_(dp && dp->size() > 1 ? dp : nullptr) {
  int64_t held = 0;
  for (int u = 0; u < int(units_.size()); ++u) {
    at_.push_back(held);
    const FlatRange p = piece(u);
    if (p.size() > 0) owned_.push_back(p);
    held += p.size();
  }
  params_ = be.empty({held}, full.dtype());
  grads_ = be.empty({held}, grad_dtype);
  for (int u = 0; u < int(units_.size()); ++u) {
    const FlatRange p = piece(u);
    if (p.size() == 0) continue;
    Tensor dst = params_.view(at(u), {p.size()});
    be.copy(dst, full.view(p.begin, {p.size()}));
  }
  zero_grads();
}

FlatRange ShardedParams::piece(int unit) const {
  const FlatRange u = units_[unit];
  if (!dp_) return u;
  const ChunkRange c = chunk_range(u.size(), dp_->size(), dp_->rank());
  return {u.begin + c.begin, u.begin + c.end};
}

void ShardedParams::zero_grads() { be_.fill(grads_, 0); }

void ShardedParams::count(int64_t bytes) {
  gathered_bytes_ += bytes;
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
}

void ShardedParams::gather_all(const Tensor& compact, Tensor& full) {
  PTDP_CHECK(compact.numel() == params_.numel() && full.numel() == units_.back().end,
             "gather_all: a compact shard and a whole buffer");
  for (int u = 0; u < int(units_.size()); ++u) {
    const FlatRange p = piece(u);
    Tensor whole = full.view(units_[u].begin, {units_[u].size()});
    if (dp_) all_gather_piece(be_, *dp_, compact.view(at(u), {p.size()}), whole);
    else be_.copy(whole, compact.view(at(u), {p.size()}));
  }
}

Tensor ShardedParams::gather(int unit) {
  Gathered& g = gathered_[unit];
  if (g.users++ > 0) return g.t;
  const FlatRange u = units_[unit];
  g.t = be_.empty({u.size()}, params_.dtype());
  count(g.t.nbytes());
  const FlatRange p = piece(unit);
  if (dp_) all_gather_piece(be_, *dp_, params_.view(at(unit), {p.size()}), g.t);
  else be_.copy(g.t, params_.view(at(unit), {p.size()}));
  return g.t;
}

void ShardedParams::release(int unit) {
  auto it = gathered_.find(unit);
  PTDP_CHECK(it != gathered_.end() && it->second.users > 0, "unit {} released without a gather", unit);
  if (--it->second.users > 0) return;
  count(-it->second.t.nbytes());
  gathered_.erase(it);  // freed (the allocator keeps the order of the queued work)
}

Tensor ShardedParams::grad_buffer(int unit) {
  auto it = grad_buffers_.find(unit);
  if (it != grad_buffers_.end()) return it->second;
  Tensor g = be_.empty({units_[unit].size()}, grads_.dtype());
  be_.fill(g, 0);
  count(g.nbytes());
  grad_buffers_[unit] = g;
  return g;
}

void ShardedParams::reduce(int unit) {
  auto it = grad_buffers_.find(unit);
  PTDP_CHECK(it != grad_buffers_.end(), "unit {} has no gradients to reduce", unit);
  const FlatRange p = piece(unit);
  Tensor dst = grads_.view(at(unit), {p.size()});
  if (!dp_) {
    be_.add_(dst, it->second);
  } else {
    Tensor sum = be_.empty({p.size()}, grads_.dtype());
    dp_->reduce_scatter(it->second, sum, ReduceOp::Sum);
    be_.add_(dst, sum);
  }
  count(-it->second.nbytes());
  grad_buffers_.erase(it);
}

}  // namespace ptdp
