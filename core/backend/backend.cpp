#include "core/backend/backend.h"

#include <chrono>

namespace ptdp {

int64_t Backend::mark() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Backend::elapsed_ms(int64_t from, int64_t to) { return double(to - from) / 1e6; }

std::string Backend::cudnn_attention_unavailable() const {
  return "the " + name() + " backend has no cuDNN (cuDNN's fused attention runs on the CUDA backend)";
}
void Backend::set_cudnn_attention(bool on) {
  if (on) throw RuntimeError("cuDNN attention: " + cudnn_attention_unavailable());
}
std::string Backend::cudnn_attention_refusal(int, int, int, int, int, DType) { return cudnn_attention_unavailable(); }

void Backend::do_linear_gelu_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) {
  do_linear_forward(pre, x, w, &b);
  do_gelu_forward(y, pre);
}
void Backend::do_linear_gelu_backward(Tensor& dpre, Tensor& dw2, Tensor* db2, const Tensor& dy, const Tensor& y,
                                      const Tensor& w2, const Tensor& pre) {
  do_linear_backward(&dpre, false, dw2, db2, dy, y, w2);
  do_gelu_backward(dpre, pre, dpre);
}

namespace {
[[noreturn]] void no_llama_op(const Backend& be, const char* op) {
  throw RuntimeError(std::string("the ") + be.name() + " backend has no " + op + " (needed by --arch llama)");
}
}  // namespace

void Backend::do_add_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, Tensor& x, const Tensor& r,
                                       const Tensor& g, const Tensor& b, double eps) {
  do_add_(x, r);
  do_layernorm_forward(y, mean, rstd, x, g, b, eps);
}
void Backend::do_add_rmsnorm_forward(Tensor& y, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g, double eps) {
  do_add_(x, r);
  do_rmsnorm_forward(y, rstd, x, g, eps);
}

void Backend::do_rmsnorm_forward(Tensor&, Tensor&, const Tensor&, const Tensor&, double) {
  no_llama_op(*this, "rmsnorm_forward");
}
void Backend::do_rmsnorm_backward(Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor*) {
  no_llama_op(*this, "rmsnorm_backward");
}
void Backend::do_rope(Tensor&, const Tensor&, int, int, int, double, bool) { no_llama_op(*this, "rope"); }
void Backend::do_swiglu_forward(Tensor&, const Tensor&) { no_llama_op(*this, "swiglu_forward"); }
void Backend::do_swiglu_backward(Tensor&, const Tensor&, const Tensor&) { no_llama_op(*this, "swiglu_backward"); }
void Backend::do_gqa_expand(Tensor&, const Tensor&, int, int, int) {
  throw RuntimeError("the " + name() + " backend has no gqa_expand (needed by --num-query-groups)");
}
void Backend::do_gqa_reduce(Tensor&, const Tensor&, int, int, int) {
  throw RuntimeError("the " + name() + " backend has no gqa_reduce (needed by --num-query-groups)");
}

namespace {
[[noreturn]] void no_block_op(const Backend& be, const char* op) {
  throw RuntimeError(std::string("the ") + be.name() + " backend has no " + op +
                     " (needed by --attention-backend flash and --context-parallel-size)");
}
}  // namespace

void Backend::do_flash_attention_forward(Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&, int, int, int,
                                         int, int, int, int64_t, int64_t, bool) {
  no_block_op(*this, "flash_attention_forward");
}
bool Backend::do_flash_attention_backward_overwrite(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                                                    const Tensor&, const Tensor&, const Tensor&, const Tensor&, int, int,
                                                    int, int, int, int, int64_t, int64_t, bool) {
  return false;
}
void Backend::do_flash_attention_backward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                          const Tensor&, const Tensor&, const Tensor&, int, int, int, int, int, int,
                                          int64_t, int64_t, bool) {
  no_block_op(*this, "flash_attention_backward");
}
void Backend::do_attention_merge(Tensor&, Tensor&, const Tensor&, const Tensor&, int, int, int, int) {
  no_block_op(*this, "attention_merge");
}
void Backend::do_qkv_split(Tensor&, Tensor&, Tensor&, const Tensor&, int, int, int) { no_block_op(*this, "qkv_split"); }
void Backend::do_qkv_join(Tensor&, const Tensor&, const Tensor&, const Tensor&, int, int, int) {
  no_block_op(*this, "qkv_join");
}
void Backend::do_rope_rows(Tensor&, const Tensor&, const Tensor&, int, int, double, bool) {
  no_block_op(*this, "rope_rows");
}

Tensor to_backend(Backend& be, const Tensor& t) {
  if (t.device() == be.device()) return t;
  Tensor d = be.empty(t.shape(), t.dtype());
  be.copy(d, t);
  return d;
}

Tensor to_host(Backend& be, const Tensor& t) {
  if (t.device() == Device::CPU) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(h, t);
  return h;
}

}  // namespace ptdp
