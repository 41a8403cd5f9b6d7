#include "core/optim/adamw.h"

#include <cmath>

namespace ptdp {

AdamW::AdamW(Backend& be, const ParamLayout& layout, Tensor params, Tensor grads, const OptimizerConfig& cfg)
    : be_(be), cfg_(cfg), params_(params), grads_(grads), layout_(layout) {
  set_norm_group(nullptr, 0);
  const int64_t n = params.numel();
  if (params.dtype() == DType::F32) {
    master_ = params;  // the model's own f32 weights are the master weights
  } else {  // bf16/f16 weights: f32 master copies, rounded back after each update
    master_ = be.empty({n}, DType::F32);
    be.copy(master_, params);
  }
  if (grads.dtype() == DType::F32) {
    master_grads_ = grads;  // mixed precision accumulates gradients in f32 already
  } else {
    master_grads_ = be.empty({n}, DType::F32);
  }
  m_ = be.empty({n}, DType::F32);
  v_ = be.empty({n}, DType::F32);
  be.fill(m_, 0);
  be.fill(v_, 0);
  for (const auto& e : layout.entries()) {  // merge neighbours with the same decay flag
    int64_t end = e.offset + shape_numel(e.shape);
    if (!segments_.empty() && segments_.back().decay == e.decay && segments_.back().end == e.offset)
      segments_.back().end = end;
    else
      segments_.push_back({e.offset, end, e.decay});
  }
}

void AdamW::set_norm_group(Communicator* mp, int tp_rank) {
  mp_ = mp && mp->size() > 1 ? mp : nullptr;
  counted_.clear();
  for (const auto& e : layout_.entries()) {
    if (e.shared_copy || (e.tp_replicated && tp_rank != 0)) continue;
    int64_t end = e.offset + shape_numel(e.shape);
    if (!counted_.empty() && counted_.back().end == e.offset) counted_.back().end = end;
    else counted_.push_back({e.offset, end, false});
  }
}

double AdamW::local_grad_sq() {
  if (master_grads_.raw() != grads_.raw()) be_.copy(master_grads_, grads_);
  double sq = 0;
  for (const auto& c : counted_) sq += be_.sum_squares(master_grads_.view(c.begin, {c.end - c.begin}));
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
  ++step_;
  info.lr = cfg_.lr.at(step_);
  info.grad_norm = global_norm;
  if (cfg_.clip_grad > 0) {
    double coeff = cfg_.clip_grad / (info.grad_norm + 1e-6);
    if (coeff < 1.0) {
      be_.scale_(master_grads_, coeff);
      info.clipped = true;
    }
  }
  AdamWParams p;
  p.lr = info.lr;
  p.beta1 = cfg_.beta1;
  p.beta2 = cfg_.beta2;
  p.eps = cfg_.eps;
  p.step = step_;
  for (const auto& s : segments_) {
    const int64_t len = s.end - s.begin;
    Tensor pm = master_.view(s.begin, {len}), g = master_grads_.view(s.begin, {len});
    Tensor m = m_.view(s.begin, {len}), v = v_.view(s.begin, {len});
    p.weight_decay = s.decay ? cfg_.weight_decay : 0.0;
    be_.adamw(pm, g, m, v, p);
  }
  refresh_params();
  return info;
}

void AdamW::refresh_params() {
  if (master_.raw() != params_.raw()) be_.copy(params_, master_);
}

}  // namespace ptdp
