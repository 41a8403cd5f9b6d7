// The CUDA backend's kernels, as host launchers on a stream. Raw device pointers; `dt` is the
// compute dtype (f32, bf16 or f16) of the pointers typed void*; statistics and parameter
// gradients are float*. Shapes are checked by the backend that calls them. Arithmetic is f32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ptdp::cuda {

// ---- elementwise.cu ----
void fill(void* x, DType dt, int64_t n, double value, cudaStream_t st);  // also i32
void convert(void* dst, DType dst_dt, const void* src, DType src_dt, int64_t n, cudaStream_t st);
void add(void* y, const void* a, const void* b, DType dt, int64_t n, cudaStream_t st);
void add_inplace(void* y, const void* x, DType dt, int64_t n, cudaStream_t st);
void scale_inplace(void* y, DType dt, double alpha, int64_t n, cudaStream_t st);
// *out = sum of x (or of x^2) in f64; `partials` holds kSumPartials doubles.
constexpr int kSumPartials = 1024;
void sum(double* out, const void* x, DType dt, int64_t n, bool squares, double* partials, cudaStream_t st);
void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps,
           float decay, float c1, float c2, cudaStream_t st);
// adamw_multi.cu: per entry of t (offsets into the flat buffers), grad *= grad_scale (when not 1),
// adamw with the entry's decay factor (1 - lr * weight_decay), lowp = the weights rounded to lowp_dt
// (when lowp is not null); one launch.
struct AdamWTable {
  static constexpr int kMax = 32;
  struct Entry {
    int64_t param, grad, state, lowp, size;
    float decay;
  } entry[kMax];
  int count;
};
void adamw_multi(float* p, float* g, float* m, float* v, void* lowp, DType lowp_dt, const AdamWTable& t, float lr,
                 float beta1, float beta2, float eps, float c1, float c2, double grad_scale, cudaStream_t st);
// y[j * ld + i] = bias[i] for i < m, j < n (a bias broadcast over the columns of column-major y)
void bias_broadcast(void* y, const void* bias, DType dt, int64_t m, int64_t n, int64_t ld, cudaStream_t st);

// ---- column sums (column_sum.cu): out[c] += sum over rows of x[r, c], in a fixed order ----
// `partials` holds column_sum_chunks(rows) * cols floats.
int64_t column_sum_chunks(int64_t rows);
void column_sum_accumulate(float* out, const void* x, DType dt, int64_t rows, int64_t cols, float* partials,
                           cudaStream_t st);

// ---- norm_act.cu ----
void layernorm_forward(void* y, float* mean, float* rstd, const void* x, const void* g, const void* b, DType dt,
                       int64_t n, int64_t c, float eps, cudaStream_t st);
// x += r (rounded to dt), then layernorm_forward of x
void add_layernorm_forward(void* y, float* mean, float* rstd, void* x, const void* r, const void* g, const void* b,
                           DType dt, int64_t n, int64_t c, float eps, cudaStream_t st);
// dx += d/dx (per row), or with residual non-null dx = residual + d/dx (here and in rmsnorm_backward);
// dg += sum dy * xhat, db += sum dy (partials: 2 * column_sum_chunks(n) * c floats)
void layernorm_backward(void* dx, float* dg, float* db, const void* dy, const void* x, const void* g,
                        const float* mean, const float* rstd, const void* residual, DType dt, int64_t n, int64_t c,
                        float* partials, cudaStream_t st);
void gelu_forward(void* y, const void* x, DType dt, int64_t n, cudaStream_t st);
void gelu_backward(void* dx, const void* x, const void* dy, DType dt, int64_t n, cudaStream_t st);

// ---- llama_ops.cu (LLaMA's operations) ----
void rmsnorm_forward(void* y, float* rstd, const void* x, const void* g, DType dt, int64_t n, int64_t c, float eps,
                     cudaStream_t st);
void add_rmsnorm_forward(void* y, float* rstd, void* x, const void* r, const void* g, DType dt, int64_t n, int64_t c,
                         float eps, cudaStream_t st);
// dx += d/dx (per row); dg += sum dy * x * rstd (partials: column_sum_chunks(n) * c floats)
void rmsnorm_backward(void* dx, float* dg, const void* dy, const void* x, const void* g, const float* rstd,
                      const void* residual, DType dt, int64_t n, int64_t c, float* partials, cudaStream_t st);
// table [2, s, hd/2] floats: cos, then sin, of pos * theta^(-2i/hd), computed in f64
void rope_table(float* table, int s, int hd, double theta, cudaStream_t st);
// q and k of qkv [n, a*3*hd] rotated by position n mod s (inverse: the transpose), v copied; y may be x
void rope(void* y, const void* x, const float* table, DType dt, int64_t n, int s, int a, int hd, bool inverse,
          cudaStream_t st);
void swiglu_forward(void* y, const void* x, DType dt, int64_t n, int64_t f, cudaStream_t st);
void swiglu_backward(void* dx, const void* x, const void* dy, DType dt, int64_t n, int64_t f, cudaStream_t st);

// ---- gqa.cu (grouped-query attention) ----
// x [n, g*(a/g + 2)*hd] (per group: its query heads, key, value) -> y [n, a*3*hd] (per head q | k | v)
void gqa_expand(void* y, const void* x, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st);
// the transpose: dx overwritten, keys' and values' gradients summed over each group's heads (f32)
void gqa_reduce(void* dx, const void* dy, DType dt, int64_t n, int a, int g, int hd, cudaStream_t st);

// ---- softmax.cu: rows of length s, row r holding query position r % s ----
// In place: scores -> causal softmax (zero above the diagonal).
void causal_softmax_forward(void* p, DType dt, int64_t rows, int s, cudaStream_t st);
// In place: dp -> ds = p * (dp - sum_j p dp) * scale on and below the diagonal, zero above.
void causal_softmax_backward(void* dp, const void* p, DType dt, int64_t rows, int s, float scale, cudaStream_t st);
// Rows of w elements from [b, s, a] order to [b, a, s] (to_heads) or back: the attention GEMMs
// then run as one strided batch of b * a products.
void permute_heads(void* out, const void* in, DType dt, int64_t b, int64_t s, int64_t a, int64_t w, bool to_heads,
                   cudaStream_t st);

// ---- flash_attention.cu (block attention, Backend::flash_attention_forward's contract) ----
constexpr int kFlashMaxHead = 128;  // head sizes the kernels take
struct FlashShape {
  int b, sq, sk, a, g, hd;
  int64_t q_pos, k_pos;
  bool causal;
};
// q [b*sq, a*hd], k and v [b*sk, g*hd]; y [b*sq, a*hd] and lse [b, a, sq] overwritten.
void flash_attention_forward(void* y, float* lse, const void* q, const void* k, const void* v, DType dt,
                             const FlashShape& s, cudaStream_t st);
// dq, dk, dv accumulate (+=); `delta` is scratch of b*a*sq floats.
void flash_attention_backward(void* dq, void* dk, void* dv, const void* dy, const void* q, const void* k,
                              const void* v, const void* y, const float* lse, float* delta, DType dt,
                              const FlashShape& s, cudaStream_t st);
// (y, lse) <- the merge of (y, lse) and (y2, lse2), in place.
void attention_merge(void* y, float* lse, const void* y2, const float* lse2, DType dt, int b, int sq, int a, int hd,
                     cudaStream_t st);

// ---- qkv_rope.cu ----
// qkv [n, g*(a/g + 2)*hd] -> q [n, a*hd], k and v [n, g*hd]; qkv_join the transpose.
void qkv_split(void* q, void* k, void* v, const void* qkv, DType dt, int64_t n, int a, int g, int hd,
               cudaStream_t st);
void qkv_join(void* dqkv, const void* dq, const void* dk, const void* dv, DType dt, int64_t n, int a, int g, int hd,
              cudaStream_t st);
// Every head of x [n, heads*hd] rotated by positions[row] (device i32 [n]); y may be x.
void rope_rows(void* y, const void* x, const int32_t* positions, DType dt, int64_t n, int heads, int hd, double theta,
               bool inverse, cudaStream_t st);

// ---- embed_xent.cu ----
void embedding_forward(void* x, const int32_t* tok, const void* wte, int64_t wte_rows, int64_t vocab_start,
                       const void* wpe, DType dt, int64_t n, int64_t h, int s, cudaStream_t st);
void embedding_backward(float* dwte, float* dwpe, const void* dx, DType dt, const int32_t* tok, int64_t wte_rows,
                        int64_t vocab_start, int64_t n, int64_t h, int s, cudaStream_t st);
void xent_row_max(float* max, const void* logits, DType dt, int64_t n, int64_t v, int64_t v_valid, cudaStream_t st);
void xent_sum_exp(float* se, const void* logits, const float* max, DType dt, int64_t n, int64_t v, int64_t v_valid,
                  cudaStream_t st);
void xent_target_logit(float* tgt, const void* logits, DType dt, const int32_t* targets, int64_t n, int64_t v,
                       int64_t vocab_start, int64_t v_valid, cudaStream_t st);
void xent_loss(float* loss, const float* max, const float* se, const float* tgt, int64_t n, cudaStream_t st);
void xent_backward(void* dlogits, const void* logits, const float* max, const float* se, DType dt,
                   const int32_t* targets, int64_t n, int64_t v, int64_t vocab_start, int64_t v_valid, float scale,
                   cudaStream_t st);

}  // namespace ptdp::cuda
