// The CPU backend: checks shapes and dtypes, then dispatches to the f32 or f64 kernel.
#include <omp.h>

#include "core/backend/backend.h"
#include "core/backend/cpu/kernels.h"

namespace ptdp {
namespace {

void expect(const Tensor& t, const char* what, Shape shape, DType dt) {
  PTDP_CHECK(t.defined(), "{} is undefined", what);
  PTDP_CHECK(t.dtype() == dt, "{} is {}, expected {}", what, dtype_name(t.dtype()), dtype_name(dt));
  PTDP_CHECK(t.shape() == shape, "{} has shape {}, expected {}", what, shape_str(t.shape()), shape_str(shape));
}

// Calls f(T{}) with T = float or double per the dtype.
template <class F>
void dispatch(DType dt, F&& f) {
  if (dt == DType::F32) f(float{});
  else if (dt == DType::F64) f(double{});
  else PTDP_CHECK(false, "the CPU backend computes in f32 or f64, not {}", dtype_name(dt));
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }

  Tensor empty(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype); }
  void fill(Tensor& x, double value) override {
    if (value == 0) return x.zero_();
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = x.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(value);
    });
  }
  void copy(Tensor& dst, const Tensor& src) override { dst.copy_from(src); }

  void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype();
    expect(w, "linear weight", {out, in}, dt);
    expect(y, "linear output", {n, out}, dt);
    if (b) expect(*b, "linear bias", {out}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_forward<T>(y.data<T>(), x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, n, in, out);
    });
  }

  void linear_backward(Tensor* dx, bool acc, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                       const Tensor& w) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype();
    expect(dy, "linear output grad", {n, out}, dt);
    expect(dw, "linear weight grad", {out, in}, dt);
    if (dx) expect(*dx, "linear input grad", {n, in}, dt);
    if (db) expect(*db, "linear bias grad", {out}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_backward<T>(dx ? dx->data<T>() : nullptr, acc, dw.data<T>(), db ? db->data<T>() : nullptr,
                              dy.data<T>(), x.data<T>(), w.data<T>(), n, in, out);
    });
  }

  void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g,
                         const Tensor& b, double eps) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    expect(y, "layernorm output", {n, c}, dt);
    expect(mean, "layernorm mean", {n}, dt);
    expect(rstd, "layernorm rstd", {n}, dt);
    expect(g, "layernorm weight", {c}, dt);
    expect(b, "layernorm bias", {c}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_forward<T>(y.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), g.data<T>(),
                                b.data<T>(), n, c, eps);
    });
  }

  void layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x,
                          const Tensor& g, const Tensor& mean, const Tensor& rstd) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    expect(dx, "layernorm input grad", {n, c}, dt);
    expect(dy, "layernorm output grad", {n, c}, dt);
    expect(dg, "layernorm weight grad", {c}, dt);
    expect(db, "layernorm bias grad", {c}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_backward<T>(dx.data<T>(), dg.data<T>(), db.data<T>(), dy.data<T>(), x.data<T>(),
                                 g.data<T>(), mean.data<T>(), rstd.data<T>(), n, c);
    });
  }

  void gelu_forward(Tensor& y, const Tensor& x) override {
    expect(y, "gelu output", x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_forward<T>(y.data<T>(), x.data<T>(), x.numel());
    });
  }
  void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    expect(dx, "gelu input grad", x.shape(), x.dtype());
    expect(dy, "gelu output grad", x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_backward<T>(dx.data<T>(), x.data<T>(), dy.data<T>(), x.numel());
    });
  }

  void attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) override {
    DType dt = qkv.dtype();
    int64_t n = int64_t(b) * s;
    expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
    expect(y, "attention output", {n, int64_t(a) * hd}, dt);
    expect(probs, "attention probs", {b, a, s, s}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_forward<T>(y.data<T>(), probs.data<T>(), qkv.data<T>(), b, s, a, hd);
    });
  }
  void attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s,
                          int a, int hd) override {
    DType dt = qkv.dtype();
    int64_t n = int64_t(b) * s;
    expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
    expect(dqkv, "attention qkv grad", {n, int64_t(3) * a * hd}, dt);
    expect(dy, "attention output grad", {n, int64_t(a) * hd}, dt);
    expect(probs, "attention probs", {b, a, s, s}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_backward<T>(dqkv.data<T>(), dy.data<T>(), qkv.data<T>(), probs.data<T>(), b, s, a, hd);
    });
  }

  void embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start,
                         const Tensor* wpe, int s) override {
    int64_t n = tokens.numel(), h = wte.dim(1);
    DType dt = wte.dtype();
    expect(x, "embedding output", {n, h}, dt);
    PTDP_CHECK(tokens.dtype() == DType::I32, "tokens must be i32");
    if (wpe) PTDP_CHECK(wpe->dim(0) >= s && wpe->dim(1) == h, "position embedding too small");
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_forward<T>(x.data<T>(), tokens.data<int32_t>(), wte.data<T>(), wte.dim(0), vocab_start,
                                wpe ? wpe->data<T>() : nullptr, n, h, s);
    });
  }
  void embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens,
                          int64_t vocab_start, int s) override {
    int64_t n = tokens.numel(), h = dwte.dim(1);
    DType dt = dwte.dtype();
    expect(dx, "embedding output grad", {n, h}, dt);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_backward<T>(dwte.data<T>(), dwpe ? dwpe->data<T>() : nullptr, dx.data<T>(),
                                 tokens.data<int32_t>(), dwte.dim(0), vocab_start, n, h, s);
    });
  }

  void xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) override {
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_row_max<T>(max.data<T>(), logits.data<T>(), logits.dim(0), logits.dim(1), v_valid);
    });
  }
  void xent_sum_exp(Tensor& se, const Tensor& logits, const Tensor& max, int64_t v_valid) override {
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_sum_exp<T>(se.data<T>(), logits.data<T>(), max.data<T>(), logits.dim(0), logits.dim(1), v_valid);
    });
  }
  void xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                         int64_t v_valid) override {
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_target_logit<T>(tgt.data<T>(), logits.data<T>(), targets.data<int32_t>(), logits.dim(0),
                                logits.dim(1), vocab_start, v_valid);
    });
  }
  void xent_loss(Tensor& loss, const Tensor& max, const Tensor& se, const Tensor& tgt) override {
    dispatch(loss.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_loss<T>(loss.data<T>(), max.data<T>(), se.data<T>(), tgt.data<T>(), loss.numel());
    });
  }
  void xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& se,
                     const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) override {
    expect(dlogits, "logits grad", logits.shape(), logits.dtype());
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_backward<T>(dlogits.data<T>(), logits.data<T>(), max.data<T>(), se.data<T>(),
                            targets.data<int32_t>(), logits.dim(0), logits.dim(1), vocab_start, v_valid, scale);
    });
  }

  void add(Tensor& y, const Tensor& a, const Tensor& b) override {
    expect(a, "add lhs", y.shape(), y.dtype());
    expect(b, "add rhs", y.shape(), y.dtype());
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add<T>(y.data<T>(), a.data<T>(), b.data<T>(), y.numel());
    });
  }
  void add_(Tensor& y, const Tensor& x) override {
    PTDP_CHECK(x.numel() == y.numel() && x.dtype() == y.dtype(), "add_: mismatched tensors");
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add_inplace<T>(y.data<T>(), x.data<T>(), y.numel());
    });
  }
  void scale_(Tensor& y, double alpha) override {
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::scale_inplace<T>(y.data<T>(), alpha, y.numel());
    });
  }
  double sum(const Tensor& x) override {
    double r = 0;
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum<T>(x.data<T>(), x.numel());
    });
    return r;
  }
  double sum_squares(const Tensor& x) override {
    double r = 0;
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum_squares<T>(x.data<T>(), x.numel());
    });
    return r;
  }

  void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) override {
    int64_t n = param.numel();
    expect(param, "adamw param", {n}, DType::F32);
    expect(grad, "adamw grad", {n}, DType::F32);
    expect(m, "adamw m", {n}, DType::F32);
    expect(v, "adamw v", {n}, DType::F32);
    cpu::adamw(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, p.lr, p.beta1,
               p.beta2, p.eps, p.weight_decay, p.step);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ptdp
