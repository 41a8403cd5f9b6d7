#include "core/accounting/flops.h"

namespace ptdp {

namespace {
// One layer's forward FLOPs per token: its dense GEMMs (QKV h x (h + 2 g hd) with g query groups:
// 3h^2 without grouped-query attention; proj h^2; the MLP) and Megatron's attention term 2 * 2 s h
// (QK^T and the product with V over the a query heads, whatever the groups).
double layer_forward_per_token(const ModelConfig& c) {
  double h = c.hidden, s = c.seq_length, f = c.ffn_hidden(), qkv = double(c.qkv_width());
  const double mlp = c.arch == Arch::Llama ? 3 * h * f : 2 * h * f;  // gate, up, down : fc1, fc2
  return 2 * (h * qkv + h * h + mlp) + 4 * s * h;
}
double logits_forward_per_token(const ModelConfig& c) { return 2.0 * c.hidden * double(c.vocab_size); }
// The paper's GPT: 4h MLP and multi-head attention, where Eq. (3) holds as written.
bool papers_gpt(const ModelConfig& c) { return c.arch == Arch::Gpt && !c.gqa() && c.ffn_hidden() == 4 * c.hidden; }
}  // namespace

double params_eq2(const ModelConfig& c) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

int64_t params_exact(const ModelConfig& c) { return params_with_vocab(c, c.vocab_size); }

int64_t params_with_vocab(const ModelConfig& c, int64_t vocab) {
  int64_t h = c.hidden, l = c.layers, f = c.ffn_hidden(), qkv = c.qkv_width();
  if (c.arch == Arch::Llama) return l * (h * qkv + h * h + 3 * h * f + 2 * h) + 2 * vocab * h + h;
  // qkv, proj, fc, fc2 with their biases, two LayerNorms: 12h^2 + 13h with f = 4h and qkv = 3h
  int64_t per_layer = h * qkv + qkv + h * h + h + 2 * h * f + f + h + 4 * h;
  return l * per_layer + (vocab + c.seq_length) * h + 2 * h;
}

double flops_forward_per_token(const ModelConfig& c) {
  return c.layers * layer_forward_per_token(c) + logits_forward_per_token(c);
}

double flops_eq3(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  if (!papers_gpt(c))
    return double(B) * s * (4 * l * layer_forward_per_token(c) + 3 * logits_forward_per_token(c));
  return 96.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double flops_model(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  if (!papers_gpt(c)) return 3.0 * double(B) * s * flops_forward_per_token(c);
  return 72.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

}  // namespace ptdp
