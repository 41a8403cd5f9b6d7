#include "core/parallel/grad_sync.h"

namespace ptdp {

GradSync::GradSync(Tensor grads, Communicator* dp, int64_t bucket_elems, bool overlap)
    : grads_(grads), dp_(dp && dp->size() > 1 ? dp : nullptr), overlap_(overlap) {
  PTDP_CHECK(bucket_elems > 0, "bucket size must be positive");
  for (int64_t end = grads.numel(); end > 0; end -= bucket_elems)
    buckets_.push_back({std::max<int64_t>(0, end - bucket_elems), end});
}

void GradSync::begin() {
  for (auto& b : buckets_) b.launched = false;
}

void GradSync::launch(Bucket& b) {
  b.launched = true;
  if (!dp_) return;
  Tensor view = grads_.view(b.begin, {b.end - b.begin});
  b.handle = dp_->all_reduce_async(view, ReduceOp::Sum);
}

void GradSync::ready_from(int64_t off) {
  if (!overlap_) return;
  for (auto& b : buckets_)
    if (!b.launched && b.begin >= off) launch(b);
}

void GradSync::finish() {
  for (auto& b : buckets_)
    if (!b.launched) launch(b);
  for (auto& b : buckets_) b.handle.wait();
}

}  // namespace ptdp
