// The CPU backend: each op (its arguments checked by Backend, op_contracts.cpp) dispatches to the
// f32 or f64 kernel. Tensors stored in bf16 or f16 (mixed precision) are widened to f32 for the
// kernel and its outputs rounded back, so the CPU backend is the reference for the CUDA backend's
// mixed precision too.
#include <omp.h>

#include "core/backend/backend.h"
#include "core/backend/cpu/convert.h"
#include "core/backend/cpu/kernels.h"

namespace ptdp {
namespace {

// Calls f(T{}) with T = float or double: the kernel type for storage dtype dt (f32 for the
// 16-bit types).
template <class F>
void dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: case DType::BF16: case DType::F16: f(float{}); break;
    case DType::F64: f(double{}); break;
    default: PTDP_CHECK(false, "the CPU backend computes on float tensors, not {}", dtype_name(dt));
  }
}

using cpu::narrow;
using cpu::widen;
using cpu::working;

template <class T>
T* ptr(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  std::span<const DType> compute_dtypes() const override {
    static constexpr DType kDtypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16};
    return kDtypes;
  }

  Tensor empty(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype); }
  void do_fill(Tensor& x, double value) override {
    if (value == 0) return x.zero_();
    Tensor w = working(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = w.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(value);
    });
    narrow(w, x);
  }
  void do_copy(Tensor& dst, const Tensor& src) override { dst.copy_from(src); }

  void do_linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype();
    Tensor xw = widen(x), ww = widen(w), bw = b ? widen(*b) : Tensor(), yw = working(y);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_forward<T>(yw.data<T>(), xw.data<T>(), ww.data<T>(), ptr<T>(bw), n, in, out);
    });
    narrow(yw, y);
  }

  void do_linear_backward(Tensor* dx, bool acc, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                          const Tensor& w) override {
    int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    DType dt = x.dtype();
    Tensor dxw = dx ? (acc ? widen(*dx) : working(*dx)) : Tensor();
    Tensor dyw = widen(dy), xw = widen(x), ww = widen(w);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::linear_backward<T>(ptr<T>(dxw), acc, dw.data<T>(), db ? db->data<T>() : nullptr, dyw.data<T>(),
                              xw.data<T>(), ww.data<T>(), n, in, out);
    });
    if (dx) narrow(dxw, *dx);
  }

  void do_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g,
                            const Tensor& b, double eps) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    Tensor yw = working(y), xw = widen(x), gw = widen(g), bw = widen(b);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_forward<T>(yw.data<T>(), mean.data<T>(), rstd.data<T>(), xw.data<T>(), gw.data<T>(),
                                bw.data<T>(), n, c, eps);
    });
    narrow(yw, y);
  }

  void do_layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x,
                             const Tensor& g, const Tensor& mean, const Tensor& rstd, const Tensor* residual) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    if (residual) do_copy(dx, *residual);  // the reference: the copy, then the accumulation
    Tensor dxw = widen(dx), dyw = widen(dy), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::layernorm_backward<T>(dxw.data<T>(), dg.data<T>(), db.data<T>(), dyw.data<T>(), xw.data<T>(),
                                 gw.data<T>(), mean.data<T>(), rstd.data<T>(), n, c);
    });
    narrow(dxw, dx);
  }

  void do_rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    Tensor yw = working(y), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::rmsnorm_forward<T>(yw.data<T>(), rstd.data<T>(), xw.data<T>(), gw.data<T>(), n, c, eps);
    });
    narrow(yw, y);
  }

  void do_rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                           const Tensor& rstd, const Tensor* residual) override {
    int64_t n = x.dim(0), c = x.dim(1);
    DType dt = x.dtype();
    if (residual) do_copy(dx, *residual);  // the reference: the copy, then the accumulation
    Tensor dxw = widen(dx), dyw = widen(dy), xw = widen(x), gw = widen(g);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::rmsnorm_backward<T>(dxw.data<T>(), dg.data<T>(), dyw.data<T>(), xw.data<T>(), gw.data<T>(),
                               rstd.data<T>(), n, c);
    });
    narrow(dxw, dx);
  }

  void do_rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse) override {
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::rope<T>(yw.data<T>(), xw.data<T>(), x.dim(0), s, a, hd, theta, inverse ? -1 : 1);
    });
    narrow(yw, y);
  }

  void do_swiglu_forward(Tensor& y, const Tensor& x) override {
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::swiglu_forward<T>(yw.data<T>(), xw.data<T>(), n, f);
    });
    narrow(yw, y);
  }

  void do_swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    Tensor dxw = working(dx), xw = widen(x), dyw = widen(dy);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::swiglu_backward<T>(dxw.data<T>(), xw.data<T>(), dyw.data<T>(), n, f);
    });
    narrow(dxw, dx);
  }

  void do_gelu_forward(Tensor& y, const Tensor& x) override {
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_forward<T>(yw.data<T>(), xw.data<T>(), x.numel());
    });
    narrow(yw, y);
  }
  void do_gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    Tensor dxw = working(dx), xw = widen(x), dyw = widen(dy);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gelu_backward<T>(dxw.data<T>(), xw.data<T>(), dyw.data<T>(), x.numel());
    });
    narrow(dxw, dx);
  }

  void do_attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) override {
    DType dt = qkv.dtype();
    Tensor yw = working(y), pw = working(probs), qw = widen(qkv);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_forward<T>(yw.data<T>(), pw.data<T>(), qw.data<T>(), b, s, a, hd);
    });
    narrow(yw, y);
    narrow(pw, probs);
  }
  void do_attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s,
                             int a, int hd) override {
    DType dt = qkv.dtype();
    Tensor dw = working(dqkv), dyw = widen(dy), qw = widen(qkv), pw = widen(probs);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::attention_backward<T>(dw.data<T>(), dyw.data<T>(), qw.data<T>(), pw.data<T>(), b, s, a, hd);
    });
    narrow(dw, dqkv);
  }

  // Block attention: lse is in the kernel type already (acc_dtype), the rest widened like above.
  void do_flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, int b,
                                  int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                  bool causal) override {
    Tensor yw = working(y), qw = widen(q), kw = widen(k), vw = widen(v);
    dispatch(q.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::flash_attention_forward<T>(yw.data<T>(), lse.data<T>(), qw.data<T>(), kw.data<T>(), vw.data<T>(), b, sq,
                                      sk, a, g, hd, q_pos, k_pos, causal);
    });
    narrow(yw, y);
  }
  void do_flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b, int sq,
                                   int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos, bool causal) override {
    Tensor dqw = widen(dq), dkw = widen(dk), dvw = widen(dv);  // they accumulate
    Tensor dyw = widen(dy), qw = widen(q), kw = widen(k), vw = widen(v), yw = widen(y);
    dispatch(q.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::flash_attention_backward<T>(dqw.data<T>(), dkw.data<T>(), dvw.data<T>(), dyw.data<T>(), qw.data<T>(),
                                       kw.data<T>(), vw.data<T>(), yw.data<T>(), lse.data<T>(), b, sq, sk, a, g, hd,
                                       q_pos, k_pos, causal);
    });
    narrow(dqw, dq);
    narrow(dkw, dk);
    narrow(dvw, dv);
  }
  void do_attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a,
                          int hd) override {
    Tensor yw = widen(y), y2w = widen(y2);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::attention_merge<T>(yw.data<T>(), lse.data<T>(), y2w.data<T>(), lse2.data<T>(), b, sq, a, hd);
    });
    narrow(yw, y);
  }
  void do_qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd) override {
    Tensor qw = working(q), kw = working(k), vw = working(v), xw = widen(qkv);
    dispatch(qkv.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::qkv_split<T>(qw.data<T>(), kw.data<T>(), vw.data<T>(), xw.data<T>(), qkv.dim(0), a, g, hd);
    });
    narrow(qw, q);
    narrow(kw, k);
    narrow(vw, v);
  }
  void do_qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g,
                   int hd) override {
    Tensor xw = working(dqkv), qw = widen(dq), kw = widen(dk), vw = widen(dv);
    dispatch(dqkv.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::qkv_join<T>(xw.data<T>(), qw.data<T>(), kw.data<T>(), vw.data<T>(), dqkv.dim(0), a, g, hd);
    });
    narrow(xw, dqkv);
  }
  void do_rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta,
                    bool inverse) override {
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::rope_rows<T>(yw.data<T>(), xw.data<T>(), positions.data<int32_t>(), x.dim(0), heads, hd, theta,
                        inverse ? -1 : 1);
    });
    narrow(yw, y);
  }

  void do_gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd) override {
    const int64_t n = x.dim(0);
    Tensor yw = working(y), xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gqa_expand<T>(yw.data<T>(), xw.data<T>(), n, a, g, hd);
    });
    narrow(yw, y);
  }
  void do_gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd) override {
    const int64_t n = dx.dim(0);
    Tensor dxw = working(dx), dyw = widen(dy);
    dispatch(dx.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::gqa_reduce<T>(dxw.data<T>(), dyw.data<T>(), n, a, g, hd);
    });
    narrow(dxw, dx);
  }

  void do_embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start,
                            const Tensor* wpe, int s) override {
    int64_t n = tokens.numel(), h = wte.dim(1);
    DType dt = wte.dtype();
    Tensor xw = working(x), ew = widen(wte), pw = wpe ? widen(*wpe) : Tensor();
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_forward<T>(xw.data<T>(), tokens.data<int32_t>(), ew.data<T>(), wte.dim(0), vocab_start,
                                ptr<T>(pw), n, h, s);
    });
    narrow(xw, x);
  }
  void do_embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens,
                             int64_t vocab_start, int s) override {
    int64_t n = tokens.numel(), h = dwte.dim(1);
    DType dt = dx.dtype();
    Tensor dxw = widen(dx);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::embedding_backward<T>(dwte.data<T>(), dwpe ? dwpe->data<T>() : nullptr, dxw.data<T>(),
                                 tokens.data<int32_t>(), dwte.dim(0), vocab_start, n, h, s);
    });
  }

  // Cross-entropy: logits and their gradient in dt, the per-row statistics in acc_dtype(dt).
  void do_xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_row_max<T>(max.data<T>(), lw.data<T>(), n, logits.dim(1), v_valid);
    });
  }
  void do_xent_sum_exp(Tensor& se, const Tensor& logits, const Tensor& max, int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_sum_exp<T>(se.data<T>(), lw.data<T>(), max.data<T>(), n, logits.dim(1), v_valid);
    });
  }
  void do_xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                            int64_t v_valid) override {
    const int64_t n = logits.dim(0);
    Tensor lw = widen(logits);
    dispatch(logits.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::xent_target_logit<T>(tgt.data<T>(), lw.data<T>(), targets.data<int32_t>(), n, logits.dim(1),
                                vocab_start, v_valid);
    });
  }
  void do_xent_loss(Tensor& loss, const Tensor& max, const Tensor& se, const Tensor& tgt) override {
    const DType ga = loss.dtype();
    dispatch(ga, [&](auto z) {
      using T = decltype(z);
      cpu::xent_loss<T>(loss.data<T>(), max.data<T>(), se.data<T>(), tgt.data<T>(), loss.numel());
    });
  }
  void do_xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& se,
                        const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) override {
    const int64_t n = logits.dim(0);
    const DType dt = logits.dtype();
    Tensor dw = working(dlogits), lw = widen(logits);
    dispatch(dt, [&](auto z) {
      using T = decltype(z);
      cpu::xent_backward<T>(dw.data<T>(), lw.data<T>(), max.data<T>(), se.data<T>(), targets.data<int32_t>(), n,
                            logits.dim(1), vocab_start, v_valid, scale);
    });
    narrow(dw, dlogits);
  }

  void do_add(Tensor& y, const Tensor& a, const Tensor& b) override {
    Tensor yw = working(y), aw = widen(a), bw = widen(b);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add<T>(yw.data<T>(), aw.data<T>(), bw.data<T>(), y.numel());
    });
    narrow(yw, y);
  }
  void do_add_(Tensor& y, const Tensor& x) override {
    Tensor yw = widen(y), xw = widen(x);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::add_inplace<T>(yw.data<T>(), xw.data<T>(), y.numel());
    });
    narrow(yw, y);
  }
  void do_scale_(Tensor& y, double alpha) override {
    Tensor yw = widen(y);
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      cpu::scale_inplace<T>(yw.data<T>(), alpha, y.numel());
    });
    narrow(yw, y);
  }
  double do_sum(const Tensor& x) override {
    double r = 0;
    Tensor xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum<T>(xw.data<T>(), x.numel());
    });
    return r;
  }
  double do_sum_squares(const Tensor& x) override {
    double r = 0;
    Tensor xw = widen(x);
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      r = cpu::sum_squares<T>(xw.data<T>(), x.numel());
    });
    return r;
  }

  void do_adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) override {
    int64_t n = param.numel();
    cpu::adamw(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, p.lr, p.beta1,
               p.beta2, p.eps, p.weight_decay, p.step);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ptdp
