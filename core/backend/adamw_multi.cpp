// adamw_multi's contract and its reference implementation: scale_, adamw and copy per segment.
#include "core/backend/backend.h"
#include "core/backend/op_check.h"

namespace ptdp {

void Backend::adamw_multi(Tensor& params, Tensor& grads, Tensor& m, Tensor& v, Tensor* lowp,
                          std::span<const AdamWSegment> segments, const AdamWParams& p, double grad_scale) {
  const OpCheck c(*this, "adamw_multi");
  c.expect(params, "adamw_multi params", {params.numel()}, DType::F32);
  c.expect(grads, "adamw_multi grads", {grads.numel()}, DType::F32);
  c.expect(m, "adamw_multi m", {m.numel()}, DType::F32);
  c.expect(v, "adamw_multi v", {m.numel()}, DType::F32);
  if (lowp) c.expect(*lowp, "adamw_multi low-precision weights", {lowp->numel()}, c.compute_dtype(*lowp));
  for (const AdamWSegment& s : segments) {
    const auto inside = [&](int64_t at, const Tensor& t) { return at >= 0 && s.size >= 0 && at + s.size <= t.numel(); };
    PTDP_CHECK(inside(s.param, params) && inside(s.grad, grads) && inside(s.state, m) && (!lowp || inside(s.lowp, *lowp)),
               "adamw_multi: a segment of {} elements at {}/{}/{}/{} runs past its buffers", s.size, s.param, s.grad,
               s.state, s.lowp);
  }
  do_adamw_multi(params, grads, m, v, lowp, segments, p, grad_scale);
}

void Backend::do_adamw_multi(Tensor& params, Tensor& grads, Tensor& m, Tensor& v, Tensor* lowp,
                             std::span<const AdamWSegment> segments, const AdamWParams& p, double grad_scale) {
  AdamWParams q = p;
  for (const AdamWSegment& s : segments) {
    if (s.size == 0) continue;
    Tensor pw = params.view(s.param, {s.size}), g = grads.view(s.grad, {s.size});
    Tensor ms = m.view(s.state, {s.size}), vs = v.view(s.state, {s.size});
    if (grad_scale != 1.0) scale_(g, grad_scale);
    q.weight_decay = s.weight_decay;
    adamw(pw, g, ms, vs, q);
    if (lowp) {
      Tensor dst = lowp->view(s.lowp, {s.size});
      copy(dst, pw);
    }
  }
}

}  // namespace ptdp
