#include "core/accounting/flops.h"

#include "core/model/tensor_inventory.h"

namespace ptdp {

namespace {
// One layer's forward FLOPs per token: 2 a GEMM's weight (QKV h x (h + 2 g hd) with g query groups:
// 3h^2 without grouped-query attention; proj h^2; the MLP: fc and fc2, or gate, up and down) and
// Megatron's attention term 2 * 2 s h (QK^T and the product with V over the a query heads,
// whatever the groups).
double layer_forward_per_token(const ModelConfig& c) {
  const ModelTensors m = model_tensors(c, c.vocab_size);
  double matrices = 0;
  for (int i = 0; i < kLayerModules; ++i) matrices += double(m.module_numel(i, 1, false));
  return 2 * matrices + 4.0 * c.seq_length * c.hidden;
}
double logits_forward_per_token(const ModelConfig& c) { return 2.0 * c.hidden * double(c.vocab_size); }
// The paper's GPT: 4h MLP and multi-head attention, where Eq. (3) holds as written.
bool papers_gpt(const ModelConfig& c) { return c.arch == Arch::Gpt && !c.gqa() && c.ffn_hidden() == 4 * c.hidden; }
}  // namespace

double params_eq2(const ModelConfig& c) {
  double l = c.layers, h = c.hidden, V = double(c.vocab_size), s = c.seq_length;
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

int64_t params_exact(const ModelConfig& c) { return model_tensors(c, c.vocab_size).total(); }

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

namespace ptdp {

double flops_megatron(const ModelConfig& c, int64_t B, int tp) {
  const double h = c.hidden, L = c.layers, s = c.seq_length, tokens = double(B) * s;
  const double kv = c.head_dim(), query = kv * c.heads, key_value = kv * c.groups();
  const double ffn_factor = c.arch == Arch::Llama ? 3.0 : 2.0;  // SwiGLU: gate and up, then down
  const double passes_fma = 3.0 * 2.0;
  const double mlp = passes_fma * h * (double(c.ffn_hidden()) * ffn_factor) * L;
  const double projections = passes_fma * (h * (query + 2.0 * key_value) + query * h) * L;
  const double logits = passes_fma * h * double(c.padded_vocab(tp));
  const double core_attention = passes_fma * query / 2.0 * 2.0 * L;  // causal: half the s^2 scores
  return tokens * (mlp + projections + logits) + double(B) * s * s * core_attention;
}

}  // namespace ptdp
