// Backend: the operations the GPT model is made of, on one device. The CPU backend is the
// reference (f32 training, f64 for gradient checks); a CUDA backend implements the same calls.
// Shapes: activations are [rows, features] row-major, rows = micro_batch * seq_length.
// Parameter gradients always accumulate (+=); other outputs are overwritten unless noted.
//
// Dtypes. Activations, weights and their gradients flowing between layers share one compute
// dtype dt: f32, bf16 or f16 (mixed precision), or f64 (gradient checks, CPU only). Parameter
// gradients (dw, db, dg, dwte, dwpe) and statistics (layernorm mean/rstd; cross-entropy max,
// sum_exp, target logit, loss) are in acc_dtype(dt): f64 for f64, f32 otherwise. Attention
// probs are in dt. Arithmetic accumulates in f32 (f64 for f64) whatever the storage.
#pragma once
#include <memory>
#include <string>

#include "core/tensor/tensor.h"

namespace ptdp {

struct AdamWParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for bias correction
};

// The dtype of parameter gradients and statistics for compute dtype dt (see above).
inline DType acc_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  virtual Tensor empty(Shape shape, DType dtype) = 0;
  virtual void fill(Tensor& x, double value) = 0;
  // Same numel; converts between float dtypes; either side may be host memory (the CUDA
  // backend copies host <-> device, synchronously).
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  // Waits until the work queued on this backend is done (the CPU backend: a no-op).
  virtual void synchronize() {}
  // Timing of queued work without waiting for it: mark() records a point of this backend's
  // queue; elapsed_ms(a, b) is the time between two marks once the work before b is done
  // (device time on a GPU: CUDA events). release_marks() forgets every mark. The CPU backend
  // runs each call at once: its marks are host clock readings.
  virtual int64_t mark();
  virtual double elapsed_ms(int64_t from, int64_t to);
  virtual void release_marks() {}

  // y[n,o] = x[n,i] w[o,i]^T + b[o] (b may be null)
  virtual void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) = 0;
  // dx = dy w (dx may be null; accumulate_dx adds instead of overwriting), dw += dy^T x,
  // db += column sums of dy (db may be null)
  virtual void linear_backward(Tensor* dx, bool accumulate_dx, Tensor& dw, Tensor* db,
                               const Tensor& dy, const Tensor& x, const Tensor& w) = 0;

  // y = (x - mean) * rstd * g + b per row; mean and rstd [n] are kept for backward
  virtual void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                 const Tensor& g, const Tensor& b, double eps) = 0;
  // dx += d/dx; dg, db accumulate
  virtual void layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy,
                                  const Tensor& x, const Tensor& g, const Tensor& mean,
                                  const Tensor& rstd) = 0;

  // LLaMA's operations. Backends without them say so (RuntimeError naming the backend).
  // RMSNorm: y = x · rstd · g per row, rstd = 1/sqrt(mean(x²) + eps) [n] kept for backward;
  // backward: dx += d/dx, dg accumulates.
  virtual void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps);
  virtual void rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                                const Tensor& rstd);
  // Rotary embedding of q and k in qkv [b*s, a*3*hd] (attention_forward's layout), position = row
  // mod s, non-interleaved halves (element i pairs with i + hd/2, angle pos·theta^(-2i/hd)); v is
  // copied. inverse: the transpose (the backward pass). y may be x.
  virtual void rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse);
  // SwiGLU: x [n, 2f] = gate | up, y [n, f] = silu(gate) · up; dx [n, 2f] is overwritten.
  virtual void swiglu_forward(Tensor& y, const Tensor& x);
  virtual void swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy);

  // GeLU, tanh approximation (GPT-2 / Megatron)
  virtual void gelu_forward(Tensor& y, const Tensor& x) = 0;
  virtual void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) = 0;

  // Causal self-attention core. qkv [b*s, a*3*hd], per head q | k | v (Megatron's fused
  // layout, so that heads split contiguously over tensor-parallel ranks); probs [b, a, s, s]
  // (softmax of q k^T / sqrt(hd), zero above the diagonal); y [b*s, a*hd].
  virtual void attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s,
                                 int a, int hd) = 0;
  virtual void attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv,
                                  const Tensor& probs, int b, int s, int a, int hd) = 0;

  // Grouped-query attention (--num-query-groups g < a): x [n, g*(a/g + 2)*hd] is the QKV
  // projection in Megatron-core's layout (per group: its a/g query heads, then its key, then its
  // value); y [n, a*3*hd] the per-head q | k | v layout that attention_forward and rope read, query
  // head j with the key and value of its group j / (a/g).
  virtual void gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd);
  // The transpose (backward): dx [n, g*(a/g + 2)*hd] gets the query gradients and, per group, the
  // sum of its a/g heads' key and value gradients; overwritten.
  virtual void gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd);

  // x[r] = wte[tok[r] - vocab_start] (zero when the token is outside this shard's rows)
  //        + wpe[r mod s] (when wpe is given)
  virtual void embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte,
                                 int64_t vocab_start, const Tensor* wpe, int s) = 0;
  // dwte += scatter of dx by token (tokens in this shard only); dwpe += dx summed by position
  virtual void embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx,
                                  const Tensor& tokens, int64_t vocab_start, int s) = 0;

  // Cross-entropy over (a shard of) the vocabulary, in the pieces that vocab-parallel
  // reduction needs. logits [n, v_shard]; only columns [0, v_valid) are real tokens.
  virtual void xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) = 0;
  virtual void xent_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& max,
                            int64_t v_valid) = 0;
  // target logit, 0 where the target is not in [vocab_start, vocab_start + v_valid)
  virtual void xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets,
                                 int64_t vocab_start, int64_t v_valid) = 0;
  // loss[r] = log(sum_exp[r]) + max[r] - tgt[r]
  virtual void xent_loss(Tensor& loss, const Tensor& max, const Tensor& sum_exp,
                         const Tensor& tgt) = 0;
  // dlogits = scale * (softmax - onehot(target)); zero in padded columns
  virtual void xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max,
                             const Tensor& sum_exp, const Tensor& targets, int64_t vocab_start,
                             int64_t v_valid, double scale) = 0;

  virtual void add(Tensor& y, const Tensor& a, const Tensor& b) = 0;  // y = a + b, one dtype
  virtual void add_(Tensor& y, const Tensor& x) = 0;                   // y += x, one dtype
  virtual void scale_(Tensor& y, double alpha) = 0;                    // y *= alpha
  // Sums in f64 of any float dtype; inf or NaN when an element is (the non-finite check).
  virtual double sum(const Tensor& x) = 0;
  virtual double sum_squares(const Tensor& x) = 0;

  // One AdamW step (decoupled weight decay) on f32 master weights.
  virtual void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                     const AdamWParams& p) = 0;

  // Forgets what a per-op profile has summed so far (the CUDA backend's PTDP_OP_PROFILE), so that
  // it covers what follows only: `ptdp train` calls it when its untimed warm-up ends.
  virtual void profile_restart() {}
};

std::unique_ptr<Backend> make_cpu_backend();

// `t` itself when it already lives where `be` computes (resp. in host memory), else a copy there.
Tensor to_backend(Backend& be, const Tensor& t);
Tensor to_host(Backend& be, const Tensor& t);

}  // namespace ptdp
