// GPT model configuration and the named presets (tiny, small, the paper's Table 1 models
// and the models of its figures).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ptdp {

struct ModelConfig {
  std::string name = "custom";
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq_length = 0;
  int64_t vocab_size = 0;
  int make_vocab_size_divisible_by = 128;  // Megatron pads V to a multiple of this times t
  double layernorm_eps = 1e-5;
  double init_std = 0.02;

  int head_dim() const { return hidden / heads; }
  int ffn_hidden() const { return 4 * hidden; }  // fits in int: validate_model bounds hidden
  // Megatron's padding: the smallest multiple of divisible_by * tp that is >= vocab_size.
  int64_t padded_vocab(int tp) const;
};

struct ModelPreset {
  const char* name;
  int layers, hidden, heads, seq_length;
  int64_t vocab_size;
  const char* what;  // where the preset comes from
};

const std::vector<ModelPreset>& model_presets();
// The preset's config; throws UsageError naming --model for an unknown name.
ModelConfig preset_config(const std::string& name);
// Upper bounds of the sizes: far beyond any model trained or simulated, and low enough that size
// arithmetic cannot overflow (4 * hidden in int; parameter counts and padded vocabulary x hidden
// in int64).
inline constexpr int kMaxLayers = 1 << 16;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 16;
inline constexpr int kMaxSeqLength = 1 << 20;
inline constexpr int64_t kMaxVocabSize = INT32_MAX;  // token ids are int32
inline constexpr int kMaxVocabDivisibleBy = 1 << 16;

// Checks sizes (positive, at most the bounds above, heads divide hidden, ...); throws UsageError
// naming the flag.
void validate_model(const ModelConfig& c);

}  // namespace ptdp
