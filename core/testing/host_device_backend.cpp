#include "core/testing/host_device_backend.h"

#include "core/tensor/allocator.h"

namespace ptdp::testing {

namespace {

// A host view of a labelled device tensor (Backend has checked every operand's device) or of a
// host tensor (either side of a copy).
Tensor hv(const Tensor& t) { return Tensor::wrap(t.raw(), t.shape(), t.dtype(), Device::CPU); }

class HostDeviceBackend final : public Backend {
 public:
  explicit HostDeviceBackend(CudnnStandIn cudnn) : cudnn_(std::move(cudnn)) {}
  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "host-device"; }
  std::span<const DType> compute_dtypes() const override { return cpu_->compute_dtypes(); }

  Tensor empty(Shape shape, DType dtype) override {
    auto st = std::make_shared<Storage>();
    st->bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
    st->allocator = &CachingHostAllocator::instance();
    st->ptr = st->allocator->allocate(st->bytes);
    st->device = Device::CUDA;
    return Tensor::from_storage(std::move(st), std::move(shape), dtype);
  }
  void do_fill(Tensor& x, double v) override {
    Tensor h = hv(x);
    cpu_->fill(h, v);
  }
  void do_copy(Tensor& dst, const Tensor& src) override {
    Tensor d = hv(dst);
    d.copy_from(hv(src));
  }

  void do_linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) override {
    Tensor yh = hv(y), bh = b ? hv(*b) : Tensor();
    cpu_->linear_forward(yh, hv(x), hv(w), b ? &bh : nullptr);
  }
  void do_linear_backward(Tensor* dx, bool acc, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                          const Tensor& w) override {
    Tensor dxh = dx ? hv(*dx) : Tensor(), dwh = hv(dw), dbh = db ? hv(*db) : Tensor();
    cpu_->linear_backward(dx ? &dxh : nullptr, acc, dwh, db ? &dbh : nullptr, hv(dy), hv(x), hv(w));
  }
  void do_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g, const Tensor& b,
                            double eps) override {
    Tensor yh = hv(y), mh = hv(mean), rh = hv(rstd);
    cpu_->layernorm_forward(yh, mh, rh, hv(x), hv(g), hv(b), eps);
  }
  void do_layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x, const Tensor& g,
                             const Tensor& mean, const Tensor& rstd, const Tensor* residual) override {
    Tensor dxh = hv(dx), dgh = hv(dg), dbh = hv(db), rh = residual ? hv(*residual) : Tensor();
    cpu_->layernorm_backward(dxh, dgh, dbh, hv(dy), hv(x), hv(g), hv(mean), hv(rstd), residual ? &rh : nullptr);
  }
  void do_rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps) override {
    Tensor yh = hv(y), rh = hv(rstd);
    cpu_->rmsnorm_forward(yh, rh, hv(x), hv(g), eps);
  }
  void do_rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                           const Tensor& rstd, const Tensor* residual) override {
    Tensor dxh = hv(dx), dgh = hv(dg), rh = residual ? hv(*residual) : Tensor();
    cpu_->rmsnorm_backward(dxh, dgh, hv(dy), hv(x), hv(g), hv(rstd), residual ? &rh : nullptr);
  }
  void do_rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse) override {
    Tensor yh = hv(y);
    cpu_->rope(yh, hv(x), s, a, hd, theta, inverse);
  }
  void do_swiglu_forward(Tensor& y, const Tensor& x) override {
    Tensor yh = hv(y);
    cpu_->swiglu_forward(yh, hv(x));
  }
  void do_swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    Tensor dxh = hv(dx);
    cpu_->swiglu_backward(dxh, hv(x), hv(dy));
  }
  void do_gelu_forward(Tensor& y, const Tensor& x) override {
    Tensor yh = hv(y);
    cpu_->gelu_forward(yh, hv(x));
  }
  void do_gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    Tensor dxh = hv(dx);
    cpu_->gelu_backward(dxh, hv(x), hv(dy));
  }
  void do_attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) override {
    Tensor yh = hv(y), ph = hv(probs);
    cpu_->attention_forward(yh, ph, hv(qkv), b, s, a, hd);
  }
  void do_attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s,
                             int a, int hd) override {
    Tensor dh = hv(dqkv);
    cpu_->attention_backward(dh, hv(dy), hv(qkv), hv(probs), b, s, a, hd);
  }
  void do_flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, int b,
                                  int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                  bool causal) override {
    Tensor yh = hv(y), lh = hv(lse);
    cpu_->flash_attention_forward(yh, lh, hv(q), hv(k), hv(v), b, sq, sk, a, g, hd, q_pos, k_pos, causal);
  }
  void do_flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b, int sq,
                                   int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos, bool causal) override {
    Tensor dqh = hv(dq), dkh = hv(dk), dvh = hv(dv);
    cpu_->flash_attention_backward(dqh, dkh, dvh, hv(dy), hv(q), hv(k), hv(v), hv(y), hv(lse), b, sq, sk, a, g, hd,
                                   q_pos, k_pos, causal);
  }
  void do_attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a,
                          int hd) override {
    Tensor yh = hv(y), lh = hv(lse);
    cpu_->attention_merge(yh, lh, hv(y2), hv(lse2), b, sq, a, hd);
  }
  void do_qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd) override {
    Tensor qh = hv(q), kh = hv(k), vh = hv(v);
    cpu_->qkv_split(qh, kh, vh, hv(qkv), a, g, hd);
  }
  void do_qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g,
                   int hd) override {
    Tensor dh = hv(dqkv);
    cpu_->qkv_join(dh, hv(dq), hv(dk), hv(dv), a, g, hd);
  }
  void do_rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta,
                    bool inverse) override {
    Tensor yh = hv(y);
    cpu_->rope_rows(yh, hv(x), hv(positions), heads, hd, theta, inverse);
  }
  void do_gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd) override {
    Tensor yh = hv(y);
    cpu_->gqa_expand(yh, hv(x), a, g, hd);
  }
  void do_gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd) override {
    Tensor dxh = hv(dx);
    cpu_->gqa_reduce(dxh, hv(dy), a, g, hd);
  }
  void do_embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start, const Tensor* wpe,
                            int s) override {
    Tensor xh = hv(x), ph = wpe ? hv(*wpe) : Tensor();
    cpu_->embedding_forward(xh, hv(tokens), hv(wte), vocab_start, wpe ? &ph : nullptr, s);
  }
  void do_embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens, int64_t vocab_start,
                             int s) override {
    Tensor wh = hv(dwte), ph = dwpe ? hv(*dwpe) : Tensor();
    cpu_->embedding_backward(wh, dwpe ? &ph : nullptr, hv(dx), hv(tokens), vocab_start, s);
  }
  void do_xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) override {
    Tensor mh = hv(max);
    cpu_->xent_row_max(mh, hv(logits), v_valid);
  }
  void do_xent_sum_exp(Tensor& se, const Tensor& logits, const Tensor& max, int64_t v_valid) override {
    Tensor sh = hv(se);
    cpu_->xent_sum_exp(sh, hv(logits), hv(max), v_valid);
  }
  void do_xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                            int64_t v_valid) override {
    Tensor th = hv(tgt);
    cpu_->xent_target_logit(th, hv(logits), hv(targets), vocab_start, v_valid);
  }
  void do_xent_loss(Tensor& loss, const Tensor& max, const Tensor& se, const Tensor& tgt) override {
    Tensor lh = hv(loss);
    cpu_->xent_loss(lh, hv(max), hv(se), hv(tgt));
  }
  void do_xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& se,
                        const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) override {
    Tensor dh = hv(dlogits);
    cpu_->xent_backward(dh, hv(logits), hv(max), hv(se), hv(targets), vocab_start, v_valid, scale);
  }
  void do_add(Tensor& y, const Tensor& a, const Tensor& b) override {
    Tensor yh = hv(y);
    cpu_->add(yh, hv(a), hv(b));
  }
  void do_add_(Tensor& y, const Tensor& x) override {
    Tensor yh = hv(y);
    cpu_->add_(yh, hv(x));
  }
  void do_scale_(Tensor& y, double alpha) override {
    Tensor yh = hv(y);
    cpu_->scale_(yh, alpha);
  }
  double do_sum(const Tensor& x) override { return cpu_->sum(hv(x)); }
  double do_sum_squares(const Tensor& x) override { return cpu_->sum_squares(hv(x)); }
  void do_adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) override {
    Tensor ph = hv(param), mh = hv(m), vh = hv(v);
    cpu_->adamw(ph, hv(grad), mh, vh, p);
  }

  std::string cudnn_attention_unavailable() const override {
    return cudnn_ ? std::string() : Backend::cudnn_attention_unavailable();
  }
  void set_cudnn_attention(bool on) override {
    if (!cudnn_) Backend::set_cudnn_attention(on);
  }
  std::string cudnn_attention_refusal(int b, int s, int a, int g, int hd, DType dt) override {
    return cudnn_ ? cudnn_(b, s, a, g, hd, dt) : Backend::cudnn_attention_refusal(b, s, a, g, hd, dt);
  }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  CudnnStandIn cudnn_;
};

}  // namespace

std::unique_ptr<Backend> make_host_device_backend(CudnnStandIn cudnn) {
  return std::make_unique<HostDeviceBackend>(std::move(cudnn));
}

}  // namespace ptdp::testing
