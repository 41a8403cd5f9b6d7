#include "core/runtime/flops.h"

namespace ptdp {

double params_eq2(const ModelConfig& c) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

int64_t params_exact(const ModelConfig& c) {
  int64_t h = c.hidden, l = c.layers;
  int64_t per_layer = 12 * h * h + 13 * h;  // qkv, proj, fc, fc2 (+ biases), two LayerNorms
  return l * per_layer + (c.vocab_size + c.seq_length) * h + 2 * h;
}

double flops_eq3(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 96.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double flops_model(const ModelConfig& c, int64_t B) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 72.0 * double(B) * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

}  // namespace ptdp
