#include "core/parallel/grad_sync.h"

#include <algorithm>

#include "core/parallel/all_gather_piece.h"

namespace ptdp {

GradSync::GradSync(Backend& be, Tensor grads, Communicator* dp, int64_t bucket_elems, bool overlap, bool sharded,
                   bool reduce_bf16)
    : be_(be),
      grads_(grads),
      dp_(dp && dp->size() > 1 ? dp : nullptr),
      overlap_(overlap),
      sharded_(sharded && dp_),
      bf16_(reduce_bf16) {
  PTDP_CHECK(bucket_elems > 0, "bucket size must be positive");
  for (int64_t end = grads.numel(); end > 0; end -= bucket_elems)
    buckets_.push_back(Bucket{std::max<int64_t>(0, end - bucket_elems), end, false, {}, {}});
  if (!sharded_) {
    owned_.push_back({0, grads.numel()});
    return;
  }
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it)
    if (FlatRange r = mine(*it); r.size() > 0) owned_.push_back(r);
}

FlatRange GradSync::mine(const Bucket& b) const {
  const ChunkRange c = chunk_range(b.end - b.begin, dp_->size(), dp_->rank());
  return {b.begin + c.begin, b.begin + c.end};
}

void GradSync::begin() {
  for (auto& b : buckets_) b.launched = false;
}

void GradSync::launch(Bucket& b) {
  b.launched = true;
  if (!dp_) return;
  Tensor view = grads_.view(b.begin, {b.end - b.begin});
  if (bf16_) {
    b.narrow = be_.empty({b.end - b.begin}, DType::BF16);
    be_.copy(b.narrow, view);
    view = b.narrow;
  }
  if (!sharded_) {
    b.handle = dp_->all_reduce_async(view, ReduceOp::Sum);
    return;
  }
  b.reduced = be_.empty({mine(b).size()}, view.dtype());
  b.handle = dp_->reduce_scatter_async(view, b.reduced, ReduceOp::Sum);
}

void GradSync::ready_from(int64_t off) {
  if (!overlap_) return;
  for (auto& b : buckets_)
    if (!b.launched && b.begin >= off && (b.end <= held_.begin || b.begin >= held_.end)) launch(b);
}

void GradSync::finish() {
  for (auto& b : buckets_)
    if (!b.launched) launch(b);
  for (auto& b : buckets_) {
    b.handle.wait();
    if (b.narrow.defined() && !b.reduced.defined()) {
      Tensor dst = grads_.view(b.begin, {b.end - b.begin});
      be_.copy(dst, b.narrow);
    }
    b.narrow = Tensor();
    if (b.reduced.defined()) {
      const FlatRange r = mine(b);
      Tensor dst = grads_.view(r.begin, {r.size()});
      be_.copy(dst, b.reduced);
      b.reduced = Tensor();
    }
  }
}

void GradSync::gather_params(Tensor& params) {
  if (!sharded_) return;
  PTDP_CHECK(params.numel() == grads_.numel(), "parameters and gradients must share the layout");
  for (auto& b : buckets_) {
    const FlatRange r = mine(b);
    Tensor whole = params.view(b.begin, {b.end - b.begin});
    all_gather_piece(be_, *dp_, params.view(r.begin, {r.size()}), whole);
  }
}

}  // namespace ptdp
