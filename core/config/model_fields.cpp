// ModelConfig's fields: the model's shape and architecture.
#include <fmt/format.h>

#include "core/config/config_fields.h"

namespace ptdp {

namespace {
// Why a field that changes only the values (not the work of a step) is not in the key.
constexpr const char* kSameWork = "it changes the values computed, not the work of a step";
}  // namespace

const std::vector<Field>& model_fields() {
  static const std::vector<Field> fields = [] {
    const FieldGroup g = FieldGroup::Model;
    std::vector<Field> v;
    v.push_back(Field(PTDP_MEMBER(model.name), "model", g)
                    .flags("--model")
                    .bound_by_hand()
                    .help("model preset (tiny, small, gpt-1.7b ... gpt-1t, fig7-1b, ..., llama-tiny, llama-tiny-gqa, "
                          "llama-7b ... llama-65b, llama2-70b, llama3-8b, llama3-70b, llama3.1-405b)")
                    .column()
                    .key());
    v.push_back(Field(PTDP_MEMBER(model.arch), "arch", g)
                    .flags("--arch")
                    .help("gpt | llama (default: the preset's; gpt without --model)")
                    .no_default_in_help()
                    .column()
                    .key("gpt")
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.layers), "layers", g)
                    .flags("--layers,--num-layers")
                    .help("transformer layers (overrides the preset)")
                    .no_default_in_help()
                    .positive()
                    .at_most(kMaxLayers)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.hidden), "hidden", g)
                    .flags("--hidden,--hidden-size")
                    .help("hidden size")
                    .no_default_in_help()
                    .positive()
                    .at_most(kMaxHidden)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.heads), "heads", g)
                    .flags("--heads,--num-attention-heads")
                    .help("attention heads")
                    .no_default_in_help()
                    .positive()
                    .at_most(kMaxHeads)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.query_groups), "query_groups", g)
                    .flags("--num-query-groups")
                    .bound_by_hand()
                    .help("query groups of grouped-query attention (key/value heads); needs --group-query-attention, "
                          "as in Megatron-LM, and must divide --heads (and be divisible by --tp)")
                    .rule({.lo = 0.0, .must = "must be positive"})
                    .column()
                    .column_text([](const RunConfig& c) {  // empty for multi-head attention
                      return c.model.gqa() ? std::to_string(c.model.groups()) : std::string();
                    })
                    .key()
                    .checkpoint([](const RunConfig& c) { return std::to_string(c.model.groups()); }));
    v.push_back(Field(PTDP_MEMBER(model.ffn_hidden_size), "ffn_hidden_size", g)
                    .flags("--ffn-hidden-size")
                    .help("MLP hidden size (llama: of gate and up each); default 4h, llama 8h/3 rounded up to 256, or "
                          "the preset's")
                    .no_default_in_help()
                    .unset_is("0")
                    .rule({.lo = 0.0, .must = "must be positive"})
                    .at_most(kMaxFfnHidden)
                    .column()
                    .column_text([](const RunConfig& c) {  // empty where it is the architecture's rule
                      ModelConfig rule = c.model;
                      rule.ffn_hidden_size = 0;
                      return c.model.ffn_hidden() != rule.ffn_hidden() ? std::to_string(c.model.ffn_hidden())
                                                                       : std::string();
                    })
                    .key()
                    .checkpoint([](const RunConfig& c) { return std::to_string(c.model.ffn_hidden()); }, "the MLP hidden size"));
    v.push_back(Field(PTDP_MEMBER(model.layernorm_eps), "norm_eps", g)
                    .flags("--norm-epsilon")
                    .help("LayerNorm / RMSNorm epsilon (default 1e-5, or the preset's)")
                    .no_default_in_help()
                    .rule({.lo = 0.0, .hi = 1.0, .lo_open = true, .must = "must be positive and at most 1"})
                    .column()
                    .column_text([](const RunConfig& c) {  // empty where it is the default
                      return c.model.layernorm_eps != ModelConfig{}.layernorm_eps
                                 ? fmt::format("{:.6g}", c.model.layernorm_eps)
                                 : std::string();
                    })
                    .key()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.seq_length), "seq_length", g)
                    .flags("--seq-length")
                    .help("sequence length")
                    .no_default_in_help()
                    .positive()
                    .at_most(kMaxSeqLength)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.vocab_size), "vocab_size", g)
                    .flags("--vocab-size")
                    .help("vocabulary size")
                    .no_default_in_help()
                    .positive()
                    .at_most(kMaxVocabSize, "must fit in 32-bit token ids")
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.make_vocab_size_divisible_by), "make_vocab_size_divisible_by", g)
                    .flags("--make-vocab-size-divisible-by")
                    .help("pad the vocabulary to a multiple of this times --tp")
                    .positive()
                    .at_most(kMaxVocabDivisibleBy)
                    .column()
                    .key("128")
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(model.init_std), "init_std", g)
                    .flags("--init-method-std")
                    .help("standard deviation of the normal initialisation (the output layers' divided by "
                          "sqrt(2 x layers), as Megatron's)")
                    .finite()
                    .positive()
                    .not_key(kSameWork));
    v.push_back(Field(PTDP_MEMBER(model.rope_theta), "rope_theta", g)
                    .flags("--rotary-base")
                    .help("llama: the base of the rotary embedding's frequencies (default 10000, or the preset's: "
                          "500000 for llama3)")
                    .no_default_in_help()
                    .finite()
                    .positive()
                    .column()
                    .column_text([](const RunConfig& c) {  // empty where it is the default
                      return c.model.rope_theta != ModelConfig{}.rope_theta ? fmt::format("{:.6g}", c.model.rope_theta)
                                                                            : std::string();
                    })
                    .key("")
                    .checkpoint());
    return v;
  }();
  return fields;
}

}  // namespace ptdp
