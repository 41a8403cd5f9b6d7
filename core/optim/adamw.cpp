#include "core/optim/adamw.h"

#include <algorithm>
#include <cmath>

namespace ptdp {

AdamW::AdamW(Backend& be, const ParamLayout& layout, Tensor params, Tensor grads, const OptimizerConfig& cfg,
             std::vector<FlatRange> owned, bool compact)
    : be_(be), cfg_(cfg), params_(params), grads_(grads), compact_(compact), owned_(std::move(owned)), layout_(layout) {
  const int64_t n = layout.total();
  PTDP_CHECK(compact || params.numel() == n, "the parameters must be laid out by the layout");
  if (owned_.empty()) owned_.push_back({0, n});
  int64_t held = 0;
  for (size_t k = 0; k < owned_.size(); ++k) {
    PTDP_CHECK(owned_[k].begin >= (k ? owned_[k - 1].end : 0) && owned_[k].end <= n && owned_[k].size() > 0,
               "owned pieces must be ascending, disjoint and inside the buffer");
    held += owned_[k].size();
  }
  PTDP_CHECK(!compact || (params.numel() == held && grads.numel() == held), "compact buffers hold the owned pieces");
  master_is_params_ = params.dtype() == DType::F32;  // the model's own f32 weights are the master weights
  grads_are_master_ = grads.dtype() == DType::F32;   // mixed precision accumulates gradients in f32 already
  master_ = master_is_params_ ? params : be.empty({held}, DType::F32);
  master_grads_ = grads_are_master_ ? grads : be.empty({held}, DType::F32);
  // Adam's moments in their dtypes (--exp-avg-dtype, --exp-avg-sq-dtype): f32, or bf16 widened for
  // each step and rounded back after it.
  PTDP_CHECK(cfg.exp_avg_dtype != DType::F16 && cfg.exp_avg_sq_dtype != DType::F16 &&
                 cfg.main_params_dtype == DType::F32,
             "the optimizer keeps f32 master weights and f32 or bf16 moments");
  m_ = be.empty({held}, cfg.exp_avg_dtype);
  v_ = be.empty({held}, cfg.exp_avg_sq_dtype);
  be.fill(m_, 0);
  be.fill(v_, 0);
  for (const auto& en : layout.entries()) {  // the owned parts of each tensor, by weight-decay group
    int64_t at = 0;  // where owned piece k starts in the compact state
    for (const FlatRange& o : owned_) {
      const int64_t lo = std::max(en.offset, o.begin), hi = std::min(en.offset + shape_numel(en.shape), o.end);
      if (lo < hi) {
        const int64_t st = at + (lo - o.begin);
        append_merged(segments_, {lo, hi, st, en.decay, compact ? st : lo});
      }
      at += o.size();
    }
  }
  if (!master_is_params_)
    for (const auto& s : segments_) {  // bf16/f16 weights: f32 master copies, rounded back after each update
      Tensor m = master_view(s);
      be.copy(m, params.view(s.buf, {s.size()}));
    }
  set_norm_group(nullptr, 0);
}

void AdamW::append_merged(std::vector<Segment>& out, const Segment& s) {
  if (!out.empty()) {
    Segment& last = out.back();
    const int64_t shift = s.begin - last.begin;
    if (last.end == s.begin && last.decay == s.decay && last.state + shift == s.state && last.buf + shift == s.buf) {
      last.end = s.end;
      return;
    }
  }
  out.push_back(s);
}

Tensor AdamW::master_view(const Segment& s) { return master_.view(master_is_params_ ? s.buf : s.state, {s.size()}); }

Tensor AdamW::master_grad_view(const Segment& s) {
  return master_grads_.view(grads_are_master_ ? s.buf : s.state, {s.size()});
}

void AdamW::set_norm_group(Communicator* mp, int tp_rank) {
  mp_ = mp && mp->size() > 1 ? mp : nullptr;
  counted_.clear();
  for (const auto& s : segments_)
    for (const auto& e : layout_.entries()) {
      if (e.shared_copy || (e.tp_replicated && tp_rank != 0)) continue;
      const int64_t lo = std::max(s.begin, e.offset), hi = std::min(s.end, e.offset + shape_numel(e.shape));
      if (lo < hi) append_merged(counted_, {lo, hi, s.state + (lo - s.begin), false, s.buf + (lo - s.begin)});
    }
}

double AdamW::local_grad_sq() {
  if (!grads_are_master_)
    for (const auto& s : segments_) {
      Tensor mg = master_grad_view(s);
      be_.copy(mg, grads_.view(s.buf, {s.size()}));
    }
  double sq = 0;
  for (const auto& c : counted_) sq += be_.sum_squares(master_grad_view(c));
  return sq;
}

StepInfo AdamW::step() {
  Tensor sq = Tensor::empty({1}, DType::F64);
  sq.data<double>()[0] = local_grad_sq();
  if (mp_) mp_->all_reduce(sq, ReduceOp::Sum);
  return step_with_norm(std::sqrt(sq.data<double>()[0]));
}

StepInfo AdamW::step_with_norm(double global_norm) {
  StepInfo info;
  info.lr = cfg_.lr.at(step_);  // read before the step count advances, as Megatron's scheduler
  ++step_;
  info.grad_norm = global_norm;
  double coeff = 1.0;
  if (cfg_.clip_grad > 0) {
    coeff = cfg_.clip_grad / (info.grad_norm + 1e-6);
    info.clipped = coeff < 1.0;
  }
  AdamWParams p;
  p.lr = info.lr;
  p.beta1 = cfg_.beta1;
  p.beta2 = cfg_.beta2;
  p.eps = cfg_.eps;
  p.step = step_;
  if (m_.dtype() != DType::F32 || v_.dtype() != DType::F32) {  // 16-bit optimizer state: its own pass
    for (const auto& s : segments_) {
      Tensor pm = master_view(s), g = master_grad_view(s);
      if (info.clipped) be_.scale_(g, coeff);
      p.weight_decay = s.decay ? cfg_.weight_decay : 0.0;
      update_16bit_state(s, pm, g, p);
    }
    refresh_params();
    return info;
  }
  // Per segment: the clipping's scale, AdamW, and the rounding into bf16/f16 weights (refresh_params'
  // copy), in one pass on backends that fuse them.
  std::vector<AdamWSegment> segs;
  segs.reserve(segments_.size());
  for (const auto& s : segments_)
    segs.push_back({.param = master_is_params_ ? s.buf : s.state,
                    .grad = grads_are_master_ ? s.buf : s.state,
                    .state = s.state,
                    .lowp = s.buf,
                    .size = s.size(),
                    .weight_decay = s.decay ? cfg_.weight_decay : 0.0});
  be_.adamw_multi(master_, master_grads_, m_, v_, master_is_params_ ? nullptr : &params_, segs, p,
                  info.clipped ? coeff : 1.0);
  return info;
}

// The precision-aware optimizer's step (Transformer Engine's FusedAdam with bf16 moments): the stored
// moments widened to f32, the f32 update, the moments rounded back to nearest even; in pieces of at
// most kStatePiece elements, so the f32 copies stay small.
void AdamW::update_16bit_state(const Segment& s, Tensor& master, Tensor& grad, const AdamWParams& p) {
  constexpr int64_t kStatePiece = int64_t(1) << 22;
  for (int64_t at = 0; at < s.size(); at += kStatePiece) {
    const int64_t n = std::min(kStatePiece, s.size() - at);
    Tensor m = m_.view(s.state + at, {n}), v = v_.view(s.state + at, {n});
    Tensor mw = be_.empty({n}, DType::F32), vw = be_.empty({n}, DType::F32);
    be_.copy(mw, m);
    be_.copy(vw, v);
    Tensor pm = master.view(at, {n}), g = grad.view(at, {n});
    be_.adamw(pm, g, mw, vw, p);
    be_.copy(m, mw);
    be_.copy(v, vw);
  }
}

void AdamW::refresh_params() {
  if (master_is_params_) return;
  for (const auto& s : segments_) {
    Tensor dst = params_.view(s.buf, {s.size()});
    be_.copy(dst, master_view(s));
  }
}

int64_t AdamW::own_bytes() const {
  return m_.nbytes() + v_.nbytes() + (master_is_params_ ? 0 : master_.nbytes()) +
         (grads_are_master_ ? 0 : master_grads_.nbytes());
}

Tensor AdamW::master_state() {
  if (!master_is_params_ || compact_ || (owned_.size() == 1 && owned_[0].size() == params_.numel())) return master_;
  Tensor out = be_.empty({m_.numel()}, DType::F32);
  for (const auto& s : segments_) {
    Tensor dst = out.view(s.state, {s.size()});
    be_.copy(dst, master_view(s));
  }
  return out;
}

void AdamW::set_master_state(const Tensor& master) {
  PTDP_CHECK(master.numel() == m_.numel() && master.dtype() == DType::F32, "master state must be {} f32 values",
             m_.numel());
  for (const auto& s : segments_) {
    Tensor dst = master_view(s);
    be_.copy(dst, master.view(s.state, {s.size()}));
  }
  refresh_params();
}

}  // namespace ptdp
