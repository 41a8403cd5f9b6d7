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
#include <span>
#include <string>

#include "core/tensor/tensor.h"

namespace ptdp {

struct AdamWParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for bias correction
};

// A segment of adamw_multi: `size` elements at these offsets of the weights, the gradients, the
// state (m and v) and the low-precision weights, updated with this weight decay.
struct AdamWSegment {
  int64_t param = 0, grad = 0, state = 0, lowp = 0, size = 0;
  double weight_decay = 0;
};

// The dtype of parameter gradients and statistics for compute dtype dt (see above).
inline DType acc_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The compute dtypes dt this backend's ops accept (the CPU: f32, f64, bf16, f16).
  virtual std::span<const DType> compute_dtypes() const = 0;

  // The ops below that take tensors are not virtual: each checks its arguments against its contract
  // (op_contracts.cpp: every tensor defined and on this backend's device, the compute dtype one of
  // compute_dtypes(), shapes, dtypes and sizes as described here) and then runs the backend's
  // protected do_ implementation, so that a backend states no check and an op's contract is stated
  // once. A broken contract is a RuntimeError naming the op or the operand and the rule.

  virtual Tensor empty(Shape shape, DType dtype) = 0;
  void fill(Tensor& x, double value);
  // Same numel; converts between float dtypes; either side may be host memory (the CUDA
  // backend copies host <-> device, synchronously).
  void copy(Tensor& dst, const Tensor& src);
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
  void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b);
  // dx = dy w (dx may be null; accumulate_dx adds instead of overwriting), dw += dy^T x,
  // db += column sums of dy (db may be null)
  void linear_backward(Tensor* dx, bool accumulate_dx, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                       const Tensor& w);

  // y = (x - mean) * rstd * g + b per row; mean and rstd [n] are kept for backward. Outputs may
  // not overlap inputs (the CUDA kernels take __restrict__ pointers), here and in rmsnorm and gqa.
  void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g, const Tensor& b,
                         double eps);
  // The residual add folded into the norm that follows it: x += r (rounded to x's dtype, as
  // add_), then y = layernorm(x); x keeps the sum. One pass over x and r where add_ and
  // layernorm_forward take two. r, y apart from x.
  void add_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g,
                             const Tensor& b, double eps);
  // dx += d/dx; dg, db accumulate. With `residual`, dx = *residual + d/dx instead (dx is only
  // written: a residual stream's gradient joins the norm's without a copy pass), here and in
  // rmsnorm_backward.
  void layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x, const Tensor& g,
                          const Tensor& mean, const Tensor& rstd, const Tensor* residual = nullptr);

  // LLaMA's operations. Backends without them say so (RuntimeError naming the backend).
  // RMSNorm: y = x · rstd · g per row, rstd = 1/sqrt(mean(x²) + eps) [n] kept for backward;
  // backward: dx += d/dx, dg accumulates.
  void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps);
  // x += r, then y = rmsnorm(x), as add_layernorm_forward.
  void add_rmsnorm_forward(Tensor& y, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g, double eps);
  void rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                        const Tensor& rstd, const Tensor* residual = nullptr);
  // Rotary embedding of q and k in qkv [b*s, a*3*hd] (attention_forward's layout), position = row
  // mod s, non-interleaved halves (element i pairs with i + hd/2, angle pos·theta^(-2i/hd)); v is
  // copied. inverse: the transpose (the backward pass). y may be x.
  void rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse);
  // SwiGLU: x [n, 2f] = gate | up, y [n, f] = silu(gate) · up; dx [n, 2f] is overwritten.
  void swiglu_forward(Tensor& y, const Tensor& x);
  void swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy);

  // GeLU, tanh approximation (GPT-2 / Megatron)
  void gelu_forward(Tensor& y, const Tensor& x);
  void gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy);
  // A linear layer and the GeLU after it (the MLP's fc): pre = x w^T + b, y = gelu(pre), pre kept
  // for the backward. Its backward seen from the next linear layer (fc2, whose input is y): dpre =
  // (dy w2) gelu'(pre), dw2 += dy^T y, db2 += column sums of dy (db2 may be null): the same as
  // linear_backward then gelu_backward, which is what a backend without a fused form runs (the
  // CUDA backend: cuBLASLt's GELU_AUX_BIAS and DGELU epilogues).
  void linear_gelu_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b);
  void linear_gelu_backward(Tensor& dpre, Tensor& dw2, Tensor* db2, const Tensor& dy, const Tensor& y,
                            const Tensor& w2, const Tensor& pre);

  // Causal self-attention core. qkv [b*s, a*3*hd], per head q | k | v (Megatron's fused
  // layout, so that heads split contiguously over tensor-parallel ranks); probs [b, a, s, s]
  // (softmax of q k^T / sqrt(hd), zero above the diagonal); y [b*s, a*hd].
  void attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd);
  void attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s, int a,
                          int hd);

  // Block attention (flash attention's form: online softmax, no [s, s] probabilities kept), the
  // op behind --attention-backend flash and context parallelism's ring. q [b*sq, a*hd] and k, v
  // [b*sk, g*hd] (row j*sq + i: token i of sequence j; head h at columns [h*hd, (h+1)*hd)); query
  // head h reads key/value head h / (a/g). Query token i sits at position q_pos + i, key token j at
  // k_pos + j; causal: key j is masked unless k_pos + j <= q_pos + i. Scores are q.k / sqrt(hd).
  // Forward: y [b*sq, a*hd] the attention output over this block alone, lse [b, a, sq] (f32, f64
  // for f64) the log-sum-exp of each row's unmasked scores; a row with every key masked gets y = 0
  // and lse = -inf. Overwritten.
  void flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, int b,
                               int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos, bool causal);
  // Backward of one block given the final output y and final lse of the rows (after every block
  // was merged, attention_merge): probabilities exp(score - lse) are rebuilt; dq, dk and dv
  // accumulate (+=), so a ring sums its blocks' contributions; with accumulate false they are
  // overwritten (one block alone: cuDNN then writes them itself, the other kernels after zeroing).
  void flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b, int sq,
                                int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos, bool causal,
                                bool accumulate = true);
  // cuDNN's fused attention (--attention-backend cudnn): why this backend cannot run it (empty when it
  // can; by default it has none), and the switch that makes flash_attention_forward and _backward
  // run it on the blocks cuDNN takes (the CUDA backend: docs/CUDA.md; ptdp's kernel elsewhere, and
  // the same results within the dtype's rounding). Switching it on where it cannot run throws.
  virtual std::string cudnn_attention_unavailable() const;
  virtual void set_cudnn_attention(bool on);
  // Why cuDNN does not run a causal block of b sequences of s tokens, a query and g key/value heads
  // of hd in dt (a rank's attention without context parallelism): it is unavailable, the block is
  // not one it is asked for, or its graphs do not build on this device (the CUDA backend builds
  // them here, once per shape). Empty when it runs it.
  virtual std::string cudnn_attention_refusal(int b, int s, int a, int g, int hd, DType dt);
  // Merges a block's partial result (y2, lse2) into (y, lse), both [b*sq, a*hd] and [b, a, sq]:
  // lse' = log(exp(lse) + exp(lse2)), y' = y exp(lse - lse') + y2 exp(lse2 - lse') per row and head
  // (a side at -inf adds nothing). y and lse are updated in place.
  void attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a, int hd);
  // The fused QKV projection [n, g*(a/g + 2)*hd] (per group its a/g query heads, its key, its
  // value; with g = a that is per head q | k | v, attention_forward's layout) split into q [n, a*hd],
  // k and v [n, g*hd]; qkv_join is the transpose (dqkv overwritten).
  void qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd);
  void qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g, int hd);
  // Rotary embedding of every head of x [n, heads*hd], row r at position positions[r] (i32 [n] on
  // this backend's device); the same rotation as rope (non-interleaved halves). y may be x.
  void rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta, bool inverse);

  // Grouped-query attention (--num-query-groups g < a): x [n, g*(a/g + 2)*hd] is the QKV
  // projection in Megatron-core's layout (per group: its a/g query heads, then its key, then its
  // value); y [n, a*3*hd] the per-head q | k | v layout that attention_forward and rope read, query
  // head j with the key and value of its group j / (a/g).
  void gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd);
  // The transpose (backward): dx [n, g*(a/g + 2)*hd] gets the query gradients and, per group, the
  // sum of its a/g heads' key and value gradients; overwritten.
  void gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd);

  // x[r] = wte[tok[r] - vocab_start] (zero when the token is outside this shard's rows)
  //        + wpe[r mod s] (when wpe is given); tokens i32 of any shape, n = tokens.numel()
  void embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start, const Tensor* wpe,
                         int s);
  // dwte += scatter of dx by token (tokens in this shard only); dwpe += dx summed by position
  void embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens, int64_t vocab_start,
                          int s);

  // Cross-entropy over (a shard of) the vocabulary, in the pieces that vocab-parallel
  // reduction needs. logits [n, v_shard]; only columns [0, v_valid) are real tokens; targets
  // i32 [n]; the statistics [n].
  void xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid);
  void xent_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& max, int64_t v_valid);
  // target logit, 0 where the target is not in [vocab_start, vocab_start + v_valid)
  void xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                         int64_t v_valid);
  // loss[r] = log(sum_exp[r]) + max[r] - tgt[r], all four f32 or f64
  void xent_loss(Tensor& loss, const Tensor& max, const Tensor& sum_exp, const Tensor& tgt);
  // dlogits = scale * (softmax - onehot(target)); zero in padded columns. dlogits may be logits
  // itself (each element is read before it is written: the loss head's gradient in place).
  void xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& sum_exp,
                     const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale);

  void add(Tensor& y, const Tensor& a, const Tensor& b);  // y = a + b, one dtype and shape
  void add_(Tensor& y, const Tensor& x);                   // y += x, one dtype and numel
  void scale_(Tensor& y, double alpha);                    // y *= alpha
  // Sums in f64 of any compute dtype; inf or NaN when an element is (the non-finite check).
  double sum(const Tensor& x);
  double sum_squares(const Tensor& x);

  // One AdamW step (decoupled weight decay) on f32 master weights: param, grad, m, v f32 [n].
  void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p);
  // One optimizer step over a bucket of pieces of flat f32 buffers (master weights, gradients,
  // Adam's m and v) and, optionally, the low-precision weights they round into. Per segment, in
  // order: grad *= grad_scale (stored; skipped when grad_scale is 1), adamw with the segment's
  // weight decay, lowp = the updated weights (copy's rounding). Exactly those ops per segment,
  // which is what the base implementation runs; the CUDA backend runs one kernel per bucket.
  void adamw_multi(Tensor& params, Tensor& grads, Tensor& m, Tensor& v, Tensor* lowp,
                   std::span<const AdamWSegment> segments, const AdamWParams& p, double grad_scale);

  // Forgets what a per-op profile has summed so far (the CUDA backend's PTDP_OP_PROFILE), so that
  // it covers what follows only: `ptdp train` calls it when its untimed warm-up ends.
  virtual void profile_restart() {}

 protected:
  // The implementations of the ops above, called with arguments that meet the op's contract.
  virtual void do_fill(Tensor& x, double value) = 0;
  virtual void do_copy(Tensor& dst, const Tensor& src) = 0;
  virtual void do_linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) = 0;
  virtual void do_linear_backward(Tensor* dx, bool accumulate_dx, Tensor& dw, Tensor* db, const Tensor& dy,
                                  const Tensor& x, const Tensor& w) = 0;
  virtual void do_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g,
                                    const Tensor& b, double eps) = 0;
  virtual void do_layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x,
                                     const Tensor& g, const Tensor& mean, const Tensor& rstd,
                                     const Tensor* residual) = 0;
  // The LLaMA ops and gqa: by default, the RuntimeError that the backend has none.
  virtual void do_rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps);
  // The fused adds: by default add_, then the norm (the reference the CUDA backend's kernels match).
  virtual void do_add_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, Tensor& x, const Tensor& r,
                                        const Tensor& g, const Tensor& b, double eps);
  virtual void do_add_rmsnorm_forward(Tensor& y, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g, double eps);
  virtual void do_rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                                   const Tensor& rstd, const Tensor* residual);
  virtual void do_rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse);
  virtual void do_swiglu_forward(Tensor& y, const Tensor& x);
  virtual void do_swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy);
  virtual void do_gelu_forward(Tensor& y, const Tensor& x) = 0;
  virtual void do_gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) = 0;
  virtual void do_linear_gelu_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b);
  virtual void do_linear_gelu_backward(Tensor& dpre, Tensor& dw2, Tensor* db2, const Tensor& dy, const Tensor& y,
                                       const Tensor& w2, const Tensor& pre);
  virtual void do_attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) = 0;
  virtual void do_attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b,
                                     int s, int a, int hd) = 0;
  // Block attention, qkv_split/join and rope_rows: by default, the RuntimeError that the backend has none.
  virtual void do_flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                          int b, int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                          bool causal);
  // flash_attention_backward with accumulate false, where the backend writes dq, dk and dv itself
  // (cuDNN's blocks); false: not done, the caller zeroes them and accumulates.
  virtual bool do_flash_attention_backward_overwrite(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy,
                                                     const Tensor& q, const Tensor& k, const Tensor& v,
                                                     const Tensor& y, const Tensor& lse, int b, int sq, int sk, int a,
                                                     int g, int hd, int64_t q_pos, int64_t k_pos, bool causal);
  virtual void do_flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b,
                                           int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                           bool causal);
  virtual void do_attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a,
                                  int hd);
  virtual void do_qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd);
  virtual void do_qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g, int hd);
  virtual void do_rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta,
                            bool inverse);
  virtual void do_gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd);
  virtual void do_gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd);
  virtual void do_embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start,
                                    const Tensor* wpe, int s) = 0;
  virtual void do_embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens,
                                     int64_t vocab_start, int s) = 0;
  virtual void do_xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) = 0;
  virtual void do_xent_sum_exp(Tensor& sum_exp, const Tensor& logits, const Tensor& max, int64_t v_valid) = 0;
  virtual void do_xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                    int64_t v_valid) = 0;
  virtual void do_xent_loss(Tensor& loss, const Tensor& max, const Tensor& sum_exp, const Tensor& tgt) = 0;
  virtual void do_xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& sum_exp,
                                const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) = 0;
  virtual void do_add(Tensor& y, const Tensor& a, const Tensor& b) = 0;
  virtual void do_add_(Tensor& y, const Tensor& x) = 0;
  virtual void do_scale_(Tensor& y, double alpha) = 0;
  virtual double do_sum(const Tensor& x) = 0;
  virtual double do_sum_squares(const Tensor& x) = 0;
  virtual void do_adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) = 0;
  virtual void do_adamw_multi(Tensor& params, Tensor& grads, Tensor& m, Tensor& v, Tensor* lowp,
                              std::span<const AdamWSegment> segments, const AdamWParams& p, double grad_scale);
};

std::unique_ptr<Backend> make_cpu_backend();

// `t` itself when it already lives where `be` computes (resp. in host memory), else a copy there.
Tensor to_backend(Backend& be, const Tensor& t);
Tensor to_host(Backend& be, const Tensor& t);

}  // namespace ptdp
