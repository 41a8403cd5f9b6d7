#include "core/accounting/flops.h"

namespace ptdp {

namespace {
// One layer's forward FLOPs per token: its dense GEMMs and Megatron's attention term 2 * 2 s h.
double layer_forward_per_token(const ModelConfig& c) {
  double h = c.hidden, s = c.seq_length, f = c.ffn_hidden();
  const double mlp = c.arch == Arch::Llama ? 3 * h * f : 2 * h * f;  // gate, up, down : fc1, fc2
  return 2 * (4 * h * h + mlp) + 4 * s * h;
}
double logits_forward_per_token(const ModelConfig& c) { return 2.0 * c.hidden * double(c.vocab_size); }
}  // namespace

double params_eq2(const ModelConfig& c) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

int64_t params_exact(const ModelConfig& c) {
  int64_t h = c.hidden, l = c.layers, f = c.ffn_hidden();
  if (c.arch == Arch::Llama) return l * (4 * h * h + 3 * h * f + 2 * h) + 2 * c.vocab_size * h + h;
  int64_t per_layer = 12 * h * h + 13 * h;  // qkv, proj, fc, fc2 (+ biases), two LayerNorms
  return l * per_layer + (c.vocab_size + c.seq_length) * h + 2 * h;
}

double flops_forward_per_token(const ModelConfig& c) {
  return c.layers * layer_forward_per_token(c) + logits_forward_per_token(c);
}

double flops_eq3(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  if (c.arch == Arch::Llama)
    return double(B) * s * (4 * l * layer_forward_per_token(c) + 3 * logits_forward_per_token(c));
  return 96.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double flops_model(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  if (c.arch == Arch::Llama) return 3.0 * double(B) * s * flops_forward_per_token(c);
  return 72.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

}  // namespace ptdp
