// The CPU backend's kernels, templated on the float type (float for training, double for
// gradient checks). Raw pointers and sizes; shapes are checked by the backend that calls them.
#pragma once
#include <cstdint>

namespace ptdp::cpu {

template <class T> void linear_forward(T* y, const T* x, const T* w, const T* b, int64_t n, int64_t in, int64_t out);
template <class T> void linear_backward(T* dx, bool acc_dx, T* dw, T* db, const T* dy, const T* x, const T* w,
                                        int64_t n, int64_t in, int64_t out);

template <class T> void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* g, const T* b,
                                          int64_t n, int64_t c, double eps);
template <class T> void layernorm_backward(T* dx, T* dg, T* db, const T* dy, const T* x, const T* g,
                                           const T* mean, const T* rstd, int64_t n, int64_t c);

template <class T> void gelu_forward(T* y, const T* x, int64_t n);
template <class T> void gelu_backward(T* dx, const T* x, const T* dy, int64_t n);

template <class T> void rmsnorm_forward(T* y, T* rstd, const T* x, const T* g, int64_t n, int64_t c, double eps);
template <class T> void rmsnorm_backward(T* dx, T* dg, const T* dy, const T* x, const T* g, const T* rstd, int64_t n,
                                         int64_t c);
template <class T> void rope(T* y, const T* x, int64_t n, int s, int a, int hd, double theta, int sign);
template <class T> void swiglu_forward(T* y, const T* x, int64_t n, int64_t f);
template <class T> void swiglu_backward(T* dx, const T* x, const T* dy, int64_t n, int64_t f);

template <class T> void attention_forward(T* y, T* probs, const T* qkv, int b, int s, int a, int hd);
template <class T> void attention_backward(T* dqkv, const T* dy, const T* qkv, const T* probs, int b, int s,
                                           int a, int hd);

// Block attention (block_attention.cpp): flash attention's form with position offsets and lse.
template <class T> void flash_attention_forward(T* y, T* lse, const T* q, const T* k, const T* v, int b, int sq,
                                                int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                                bool causal);
template <class T> void flash_attention_backward(T* dq, T* dk, T* dv, const T* dy, const T* q, const T* k,
                                                 const T* v, const T* y, const T* lse, int b, int sq, int sk, int a,
                                                 int g, int hd, int64_t q_pos, int64_t k_pos, bool causal);
template <class T> void attention_merge(T* y, T* lse, const T* y2, const T* lse2, int b, int sq, int a, int hd);
template <class T> void qkv_split(T* q, T* k, T* v, const T* qkv, int64_t n, int a, int g, int hd);
template <class T> void qkv_join(T* dqkv, const T* dq, const T* dk, const T* dv, int64_t n, int a, int g, int hd);
template <class T> void rope_rows(T* y, const T* x, const int32_t* positions, int64_t n, int heads, int hd,
                                  double theta, int sign);

template <class T> void gqa_expand(T* y, const T* x, int64_t n, int a, int g, int hd);
template <class T> void gqa_reduce(T* dx, const T* dy, int64_t n, int a, int g, int hd);

template <class T> void embedding_forward(T* x, const int32_t* tok, const T* wte, int64_t rows, int64_t vocab_start,
                                          const T* wpe, int64_t n, int64_t h, int s);
template <class T> void embedding_backward(T* dwte, T* dwpe, const T* dx, const int32_t* tok, int64_t rows,
                                           int64_t vocab_start, int64_t n, int64_t h, int s);

template <class T> void xent_row_max(T* max, const T* logits, int64_t n, int64_t v, int64_t v_valid);
template <class T> void xent_sum_exp(T* se, const T* logits, const T* max, int64_t n, int64_t v, int64_t v_valid);
template <class T> void xent_target_logit(T* tgt, const T* logits, const int32_t* targets, int64_t n, int64_t v,
                                          int64_t vocab_start, int64_t v_valid);
template <class T> void xent_loss(T* loss, const T* max, const T* se, const T* tgt, int64_t n);
template <class T> void xent_backward(T* dlogits, const T* logits, const T* max, const T* se,
                                      const int32_t* targets, int64_t n, int64_t v, int64_t vocab_start,
                                      int64_t v_valid, double scale);

template <class T> void add(T* y, const T* a, const T* b, int64_t n);
template <class T> void add_inplace(T* y, const T* x, int64_t n);
template <class T> void scale_inplace(T* y, double alpha, int64_t n);
template <class T> double sum(const T* x, int64_t n);
template <class T> double sum_squares(const T* x, int64_t n);
void adamw(float* p, const float* g, float* m, float* v, int64_t n, double lr, double b1, double b2,
           double eps, double wd, int64_t step);

}  // namespace ptdp::cpu
