// The CPU backend: checks shapes and dtypes, then dispatches to the f32 or f64 kernel. Tensors
// stored in bf16 or f16 (mixed precision) are widened to f32 for the kernel and its outputs
// rounded back, so the CPU backend is the reference for the CUDA backend's mixed precision too.
#include <omp.h>

#include "core/backend/backend.h"
#include "core/backend/cpu/convert.h"
#include "core/backend/cpu/kernels.h"

namespace ptdp {
namespace {

void expect(const Tensor& t, const char* what, Shape shape, DType dt) {
  PTDP_CHECK(t.defined(), "{} is undefined", what);
  PTDP_CHECK(t.dtype() == dt, "{} is {}, expected {}", what, dtype_name(t.dtype()), dtype_name(dt));
  PTDP_CHECK(t.shape() == shape, "{} has shape {}, expected {}", what, shape_str(t.shape()), shape_str(shape));
}

// The dtype the kernels compute in for storage dtype dt (f32 for the 16-bit types).
DType kernel_dtype(DType dt) {
  PTDP_CHECK(dt == DType::F32 || dt == DType::F64 || cpu::is_16bit(dt),
             "the CPU backend computes on float tensors, not {}", dtype_name(dt));
  return acc_dtype(dt);
}

// Calls f(T{}) with T = float or double: the kernel type for storage dtype dt.
template <class F>
void dispatch(DType dt, F&& f) {
  if (kernel_dtype(dt) == DType::F32) f(float{});
  else f(double{});
}

using cpu::narrow;
using cpu::widen;
using cpu::working;

template <class T>
T* ptr(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// The compact grouped-query QKV [n, g*(a/g + 2)*hd].
void check_gqa(const Tensor& qkv, int a, int g, int hd) {
  PTDP_CHECK(a > 0 && g > 0 && hd > 0 && a % g == 0, "gqa: {} query groups must divide {} heads (head size {})",
             g, a, hd);
  PTDP_CHECK(qkv.defined() && qkv.ndim() == 2 && qkv.dim(1) == int64_t(a + 2 * g) * hd,
             "gqa: qkv must be [n, (a + 2g)*hd] = [n, {}]", int64_t(a + 2 * g) * hd);
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }

  Tensor empty(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype); }
  void fill(Tensor& x, double value) override {
    if (value == 0) return x.zero_();
    Tensor w = working(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = w.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(value);
    });
    narrow(w, x);
  }
  void copy(Tensor& dst, const Tensor& src) override { dst.copy_from(src); }

  void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype();
    expect(w, "linear weight", {out, in}, dt);
    expect(y, "linear output", {n, out}, dt);
    if (b) expect(*b, "linear bias", {out}, dt);
    Tensor xw = widen(x), ww = widen(w), bw = b ? widen(*b) : Tensor(), yw = working(y);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_forward<T>(yw.data<T>(), xw.data<T>(), ww.data<T>(), ptr<T>(bw), n, in, out);
    });
    narrow(yw, y);
  }

  void linear_backward(Tensor* dx, bool acc, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                       const Tensor& w) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype(), ga = acc_dtype(dt);
    expect(dy, "linear output grad", {n, out}, dt);
    expect(dw, "linear weight grad", {out, in}, ga);
    if (dx) expect(*dx, "linear input grad", {n, in}, dt);
    if (db) expect(*db, "linear bias grad", {out}, ga);
    Tensor dxw = dx ? (acc ? widen(*dx) : working(*dx)) : Tensor();
    Tensor dyw = widen(dy), xw = widen(x), ww = widen(w);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_backward<T>(ptr<T>(dxw), acc, dw.data<T>(), db ? db->data<T>() : nullptr, dyw.data<T>(),
                              xw.data<T>(), ww.data<T>(), n, in, out);
    });
    if (dx) narrow(dxw, *dx);
  }

  void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g,
                         const Tensor& b, double eps) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype(), ga = acc_dtype(dt);
    expect(y, "layernorm output", {n, c}, dt);
    expect(mean, "layernorm mean", {n}, ga);
    expect(rstd, "layernorm rstd", {n}, ga);
    expect(g, "layernorm weight", {c}, dt);
    expect(b, "layernorm bias", {c}, dt);
    Tensor yw = working(y), xw = widen(x), gw = widen(g), bw = widen(b);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_forward<T>(yw.data<T>(), mean.data<T>(), rstd.data<T>(), xw.data<T>(), gw.data<T>(),
                                bw.data<T>(), n, c, eps);
    });
    narrow(yw, y);
  }

  void layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x,
                          const Tensor& g, const Tensor& mean, const Tensor& rstd) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype(), ga = acc_dtype(dt);
    expect(dx, "layernorm input grad", {n, c}, dt);
    expect(dy, "layernorm output grad", {n, c}, dt);
    expect(dg, "layernorm weight grad", {c}, ga);
    expect(db, "layernorm bias grad", {c}, ga);
    expect(mean, "layernorm mean", {n}, ga);
    expect(rstd, "layernorm rstd", {n}, ga);
    Tensor dxw = widen(dx), dyw = widen(dy), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_backward<T>(dxw.data<T>(), dg.data<T>(), db.data<T>(), dyw.data<T>(), xw.data<T>(),
                                 gw.data<T>(), mean.data<T>(), rstd.data<T>(), n, c);
    });
    narrow(dxw, dx);
  }

  void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    expect(y, "rmsnorm output", {n, c}, dt);
    expect(rstd, "rmsnorm rstd", {n}, acc_dtype(dt));
    expect(g, "rmsnorm weight", {c}, dt);
    Tensor yw = working(y), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::rmsnorm_forward<T>(yw.data<T>(), rstd.data<T>(), xw.data<T>(), gw.data<T>(), n, c, eps);
    });
    narrow(yw, y);
  }

  void rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                        const Tensor& rstd) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype(), ga = acc_dtype(dt);
    expect(dx, "rmsnorm input grad", {n, c}, dt);
    expect(dy, "rmsnorm output grad", {n, c}, dt);
    expect(dg, "rmsnorm weight grad", {c}, ga);
    expect(rstd, "rmsnorm rstd", {n}, ga);
    Tensor dxw = widen(dx), dyw = widen(dy), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::rmsnorm_backward<T>(dxw.data<T>(), dg.data<T>(), dyw.data<T>(), xw.data<T>(), gw.data<T>(),
                               rstd.data<T>(), n, c);
    });
    narrow(dxw, dx);
  }

  void rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse) override {
    PTDP_CHECK(x.ndim() == 2 && x.dim(1) == int64_t(3) * a * hd && x.dim(0) % s == 0 && hd % 2 == 0,
               "rope: qkv must be [b*s, 3*a*hd] with an even head size");
    expect(y, "rope output", x.shape(), x.dtype());
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::rope<T>(yw.data<T>(), xw.data<T>(), x.dim(0), s, a, hd, theta, inverse ? -1 : 1);
    });
    narrow(yw, y);
  }

  void swiglu_forward(Tensor& y, const Tensor& x) override {
    PTDP_CHECK(x.ndim() == 2 && x.dim(1) % 2 == 0, "swiglu: input must be [n, 2f]");
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    expect(y, "swiglu output", {n, f}, x.dtype());
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::swiglu_forward<T>(yw.data<T>(), xw.data<T>(), n, f);
    });
    narrow(yw, y);
  }

  void swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    PTDP_CHECK(x.ndim() == 2 && x.dim(1) % 2 == 0, "swiglu: input must be [n, 2f]");
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    expect(dx, "swiglu input grad", x.shape(), x.dtype());
    expect(dy, "swiglu output grad", {n, f}, x.dtype());
    Tensor dxw = working(dx), xw = widen(x), dyw = widen(dy);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::swiglu_backward<T>(dxw.data<T>(), xw.data<T>(), dyw.data<T>(), n, f);
    });
    narrow(dxw, dx);
  }

  void gelu_forward(Tensor& y, const Tensor& x) override {
    expect(y, "gelu output", x.shape(), x.dtype());
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_forward<T>(yw.data<T>(), xw.data<T>(), x.numel());
    });
    narrow(yw, y);
  }
  void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    expect(dx, "gelu input grad", x.shape(), x.dtype());
    expect(dy, "gelu output grad", x.shape(), x.dtype());
    Tensor dxw = working(dx), xw = widen(x), dyw = widen(dy);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_backward<T>(dxw.data<T>(), xw.data<T>(), dyw.data<T>(), x.numel());
    });
    narrow(dxw, dx);
  }

  void attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) override {
    DType dt = qkv.dtype();
    int64_t n = int64_t(b) * s;
    expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
    expect(y, "attention output", {n, int64_t(a) * hd}, dt);
    expect(probs, "attention probs", {b, a, s, s}, dt);
    Tensor yw = working(y), pw = working(probs), qw = widen(qkv);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_forward<T>(yw.data<T>(), pw.data<T>(), qw.data<T>(), b, s, a, hd);
    });
    narrow(yw, y);
    narrow(pw, probs);
  }
  void attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s,
                          int a, int hd) override {
    DType dt = qkv.dtype();
    int64_t n = int64_t(b) * s;
    expect(qkv, "attention qkv", {n, int64_t(3) * a * hd}, dt);
    expect(dqkv, "attention qkv grad", {n, int64_t(3) * a * hd}, dt);
    expect(dy, "attention output grad", {n, int64_t(a) * hd}, dt);
    expect(probs, "attention probs", {b, a, s, s}, dt);
    Tensor dw = working(dqkv), dyw = widen(dy), qw = widen(qkv), pw = widen(probs);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_backward<T>(dw.data<T>(), dyw.data<T>(), qw.data<T>(), pw.data<T>(), b, s, a, hd);
    });
    narrow(dw, dqkv);
  }

  void gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd) override {
    check_gqa(x, a, g, hd);
    const int64_t n = x.dim(0);
    expect(y, "gqa_expand output", {n, int64_t(3) * a * hd}, x.dtype());
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gqa_expand<T>(yw.data<T>(), xw.data<T>(), n, a, g, hd);
    });
    narrow(yw, y);
  }
  void gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd) override {
    check_gqa(dx, a, g, hd);
    const int64_t n = dx.dim(0);
    expect(dy, "gqa_reduce input", {n, int64_t(3) * a * hd}, dx.dtype());
    Tensor dxw = working(dx), dyw = widen(dy);
    dispatch(dx.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gqa_reduce<T>(dxw.data<T>(), dyw.data<T>(), n, a, g, hd);
    });
    narrow(dxw, dx);
  }

  void embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start,
                         const Tensor* wpe, int s) override {
    int64_t n = tokens.numel(), h = wte.dim(1);
    DType dt = wte.dtype();
    expect(x, "embedding output", {n, h}, dt);
    PTDP_CHECK(tokens.dtype() == DType::I32, "tokens must be i32");
    if (wpe) PTDP_CHECK(wpe->dim(0) >= s && wpe->dim(1) == h && wpe->dtype() == dt, "position embedding too small");
    Tensor xw = working(x), ew = widen(wte), pw = wpe ? widen(*wpe) : Tensor();
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_forward<T>(xw.data<T>(), tokens.data<int32_t>(), ew.data<T>(), wte.dim(0), vocab_start,
                                ptr<T>(pw), n, h, s);
    });
    narrow(xw, x);
  }
  void embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens,
                          int64_t vocab_start, int s) override {
    int64_t n = tokens.numel(), h = dwte.dim(1);
    DType dt = dx.dtype(), ga = acc_dtype(dt);
    expect(dx, "embedding output grad", {n, h}, dt);
    expect(dwte, "word embedding grad", dwte.shape(), ga);
    if (dwpe) expect(*dwpe, "position embedding grad", dwpe->shape(), ga);
    Tensor dxw = widen(dx);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_backward<T>(dwte.data<T>(), dwpe ? dwpe->data<T>() : nullptr, dxw.data<T>(),
                                 tokens.data<int32_t>(), dwte.dim(0), vocab_start, n, h, s);
    });
  }

  // Cross-entropy: logits and their gradient in dt, the per-row statistics in acc_dtype(dt).
  void xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    expect(max, "row max", {n}, acc_dtype(logits.dtype()));
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_row_max<T>(max.data<T>(), lw.data<T>(), n, logits.dim(1), v_valid);
    });
  }
  void xent_sum_exp(Tensor& se, const Tensor& logits, const Tensor& max, int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    const DType ga = acc_dtype(logits.dtype());
    expect(se, "sum of exponentials", {n}, ga);
    expect(max, "row max", {n}, ga);
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_sum_exp<T>(se.data<T>(), lw.data<T>(), max.data<T>(), n, logits.dim(1), v_valid);
    });
  }
  void xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                         int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    expect(tgt, "target logit", {n}, acc_dtype(logits.dtype()));
    expect(targets, "targets", {n}, DType::I32);
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_target_logit<T>(tgt.data<T>(), lw.data<T>(), targets.data<int32_t>(), n, logits.dim(1),
                                vocab_start, v_valid);
    });
  }
  void xent_loss(Tensor& loss, const Tensor& max, const Tensor& se, const Tensor& tgt) override {
    const DType ga = loss.dtype();
    PTDP_CHECK(ga == DType::F32 || ga == DType::F64, "the loss is f32 or f64, not {}", dtype_name(ga));
    for (const Tensor* t : {&max, &se, &tgt}) expect(*t, "cross-entropy statistic", loss.shape(), ga);
    dispatch(ga, [&](auto z) {
      using T = decltype(z);
      cpu::xent_loss<T>(loss.data<T>(), max.data<T>(), se.data<T>(), tgt.data<T>(), loss.numel());
    });
  }
  void xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& se,
                     const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) override {
    const int64_t n = logits.dim(0);
    const DType dt = logits.dtype(), ga = acc_dtype(dt);
    expect(dlogits, "logits grad", logits.shape(), dt);
    expect(max, "row max", {n}, ga);
    expect(se, "sum of exponentials", {n}, ga);
    Tensor dw = working(dlogits), lw = widen(logits);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::xent_backward<T>(dw.data<T>(), lw.data<T>(), max.data<T>(), se.data<T>(), targets.data<int32_t>(), n,
                            logits.dim(1), vocab_start, v_valid, scale);
    });
    narrow(dw, dlogits);
  }

  void add(Tensor& y, const Tensor& a, const Tensor& b) override {
    expect(a, "add lhs", y.shape(), y.dtype());
    expect(b, "add rhs", y.shape(), y.dtype());
    Tensor yw = working(y), aw = widen(a), bw = widen(b);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add<T>(yw.data<T>(), aw.data<T>(), bw.data<T>(), y.numel());
    });
    narrow(yw, y);
  }
  void add_(Tensor& y, const Tensor& x) override {
    PTDP_CHECK(x.numel() == y.numel() && x.dtype() == y.dtype(), "add_: mismatched tensors");
    Tensor yw = widen(y), xw = widen(x);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add_inplace<T>(yw.data<T>(), xw.data<T>(), y.numel());
    });
    narrow(yw, y);
  }
  void scale_(Tensor& y, double alpha) override {
    Tensor yw = widen(y);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::scale_inplace<T>(yw.data<T>(), alpha, y.numel());
    });
    narrow(yw, y);
  }
  double sum(const Tensor& x) override {
    double r = 0;
    Tensor xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum<T>(xw.data<T>(), x.numel());
    });
    return r;
  }
  double sum_squares(const Tensor& x) override {
    double r = 0;
    Tensor xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum_squares<T>(xw.data<T>(), x.numel());
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
