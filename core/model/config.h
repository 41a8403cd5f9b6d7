// Model configuration and the named presets: GPT (tiny, small, the paper's Table 1 models and
// the models of its figures) and LLaMA (Touvron et al. 2023: llama-tiny and the four sizes of
// its Table 2; LLaMA 2 70B and LLaMA 3 8B/70B with grouped-query attention; llama-tiny-gqa).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/enum_names.h"

namespace ptdp {

// gpt: GPT-2 as in the paper (LayerNorm, GeLU MLP, learned positions, biases, output layer tied
// to the word embedding). llama: RMSNorm before attention and MLP, SwiGLU MLP of hidden size
// 2/3 * 4h rounded up to a multiple of 256, rotary position embeddings (Megatron's non-interleaved
// halves), no biases, an untied output layer.
enum class Arch { Gpt, Llama };
template <>
struct EnumNames<Arch> {
  static constexpr std::array values{std::pair{Arch::Gpt, std::string_view("gpt")},
                                     std::pair{Arch::Llama, std::string_view("llama")}};
};

struct ModelConfig {
  std::string name = "custom";
  Arch arch = Arch::Gpt;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq_length = 0;
  int64_t vocab_size = 0;
  int make_vocab_size_divisible_by = 128;  // Megatron pads V to a multiple of this times t
  // Grouped-query attention (Ainslie et al. 2023; Megatron's --group-query-attention
  // --num-query-groups): the heads share query_groups key/value heads, heads/query_groups query
  // heads per group. 0 means heads (multi-head attention).
  int query_groups = 0;
  int ffn_hidden_size = 0;     // the MLP hidden size (Megatron's --ffn-hidden-size); 0: ffn_hidden()'s rule
  double layernorm_eps = 1e-5;  // LayerNorm / RMSNorm epsilon (--norm-epsilon)
  double init_std = 0.02;
  double rope_theta = 10000;  // llama: the base of the rotary frequencies

  int head_dim() const { return hidden / heads; }
  // Key/value heads: query_groups, or heads when 0 (multi-head attention).
  int groups() const { return query_groups > 0 ? query_groups : heads; }
  bool gqa() const { return groups() != heads; }
  // Columns of the fused QKV projection: heads query heads and groups() key and value heads of
  // head_dim() each (3h for multi-head attention).
  int64_t qkv_width() const { return int64_t(heads + 2 * groups()) * head_dim(); }
  // MLP hidden size (per gate and up for llama): ffn_hidden_size when set, else 4h (gpt) or
  // 2/3 * 4h rounded up to a multiple of 256 (llama); fits in int: the fields' bounds keep it so.
  int ffn_hidden() const {
    if (ffn_hidden_size > 0) return ffn_hidden_size;
    return arch == Arch::Llama ? (8 * hidden / 3 + 255) / 256 * 256 : 4 * hidden;
  }
  bool tied_embedding() const { return arch == Arch::Gpt; }
  // Megatron's padding: the smallest multiple of divisible_by * tp that is >= vocab_size.
  int64_t padded_vocab(int tp) const;
};

struct ModelPreset {
  const char* name;
  int layers, hidden, heads, seq_length;
  int64_t vocab_size;
  const char* what;  // where the preset comes from
  Arch arch = Arch::Gpt;
  int query_groups = 0;       // 0: multi-head attention
  int ffn_hidden_size = 0;    // 0: the architecture's rule (ModelConfig::ffn_hidden)
  double norm_eps = 1e-5;     // LayerNorm / RMSNorm epsilon
  double rope_theta = 10000;  // llama: the rotary base
};

const std::vector<ModelPreset>& model_presets();
// The preset's config; throws UsageError naming --model for an unknown name.
ModelConfig preset_config(const std::string& name);
// Upper bounds of the sizes (the fields' rules, core/config/model_fields.cpp): far beyond any model
// trained or simulated, and low enough that size arithmetic cannot overflow (4 * hidden in int; parameter counts and padded vocabulary x hidden
// in int64).
inline constexpr int kMaxLayers = 1 << 16;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 16;
inline constexpr int kMaxFfnHidden = 1 << 22;  // 4 * kMaxHidden: ffn_hidden() * 2 fits in int
inline constexpr int kMaxSeqLength = 1 << 20;
inline constexpr int64_t kMaxVocabSize = INT32_MAX;  // token ids are int32
inline constexpr int kMaxVocabDivisibleBy = 1 << 16;

}  // namespace ptdp
