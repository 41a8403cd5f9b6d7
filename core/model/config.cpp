#include "core/model/config.h"

#include "core/common/error.h"

namespace ptdp {

int64_t ModelConfig::padded_vocab(int tp) const {
  int64_t multiple = int64_t(make_vocab_size_divisible_by) * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"tiny", 4, 64, 4, 32, 256, "tests: byte-level, l=4 h=64 a=4 s=32"},
      {"small", 4, 256, 8, 256, 256, "CPU runs: byte-level, l=4 h=256 a=8 s=256"},
      // Table 1 (weak scaling), V=51200, s=2048.
      {"gpt-1.7b", 24, 2304, 24, 2048, 51200, "Table 1, 1.7B"},
      {"gpt-3.6b", 30, 3072, 32, 2048, 51200, "Table 1, 3.6B"},
      {"gpt-7.5b", 36, 4096, 32, 2048, 51200, "Table 1, 7.5B"},
      {"gpt-18b", 40, 6144, 48, 2048, 51200, "Table 1, 18.4B"},
      {"gpt-39b", 48, 8192, 64, 2048, 51200, "Table 1, 39.1B"},
      {"gpt-76b", 60, 10240, 80, 2048, 51200, "Table 1, 76.1B"},
      {"gpt-145b", 80, 12288, 96, 2048, 51200, "Table 1, 145.6B; Figure 17"},
      {"gpt-310b", 96, 16384, 128, 2048, 51200, "Table 1, 310.1B"},
      {"gpt-530b", 105, 20480, 128, 2048, 51200, "Table 1, 529.6B"},
      {"gpt-1t", 128, 25600, 160, 2048, 51200, "Table 1, 1008B"},
      // Figure models.
      {"fig7-1b", 4, 4096, 128, 2048, 51200, "Figures 7 and 8, 1.02B"},
      {"fig11-p1", 3, 20480, 128, 2048, 51200, "Figure 11, p=1 (16.2B)"},
      {"fig11-p2", 6, 20480, 128, 2048, 51200, "Figure 11, p=2 (31.3B)"},
      {"fig11-p4", 12, 20480, 128, 2048, 51200, "Figure 11, p=4 (61.5B)"},
      {"fig11-p8", 24, 20480, 128, 2048, 51200, "Figure 11, p=8 (121.9B)"},
      {"gpt3-175b", 96, 12288, 96, 2048, 51200, "GPT-3, Figures 12 and 18, 174.6B"},
      {"fig13-162b", 32, 20480, 128, 2048, 51200, "Figure 13, 162.2B"},
      {"fig14-5.9b", 32, 3840, 32, 2048, 51200, "Figures 14 and 15, 5.9B"},
      {"fig16-91b", 32, 15360, 128, 2048, 51200, "Figure 16, 91.4B"},
      // LLaMA (Touvron et al. 2023, Table 2), V=32000 (SentencePiece BPE), s=2048, RMSNorm eps 1e-6
      // (the paper's code and the released models' config.json, rms_norm_eps).
      {"llama-tiny", 4, 64, 4, 32, 256, "tests: byte-level llama, l=4 h=64 a=4 s=32", Arch::Llama},
      {"llama-tiny-gqa", 4, 64, 4, 32, 256, "tests: llama-tiny with grouped-query attention, 2 query groups",
       Arch::Llama, 2},
      {"llama-7b", 32, 4096, 32, 2048, 32000, "LLaMA 6.7B", Arch::Llama, 0, 0, 1e-6},
      {"llama-13b", 40, 5120, 40, 2048, 32000, "LLaMA 13.0B", Arch::Llama, 0, 0, 1e-6},
      {"llama-33b", 60, 6656, 52, 2048, 32000, "LLaMA 32.5B", Arch::Llama, 0, 0, 1e-6},
      {"llama-65b", 80, 8192, 64, 2048, 32000, "LLaMA 65.2B", Arch::Llama, 0, 0, 1e-6},
      // Grouped-query attention: 8 key/value heads, the MLP size given (not the 8h/3 rule).
      {"llama2-70b", 80, 8192, 64, 4096, 32000,
       "Llama 2 70B (Touvron et al. 2023b, Table 1; meta-llama/Llama-2-70b-hf config.json): 69.0B, GQA 8 groups, "
       "ffn 28672, eps 1e-5",
       Arch::Llama, 8, 28672, 1e-5, 10000},
      {"llama3-8b", 32, 4096, 32, 8192, 128256,
       "Llama 3 8B (Meta 2024; meta-llama/Meta-Llama-3-8B config.json): 8.0B, GQA 8 groups, ffn 14336, rope theta "
       "500000, eps 1e-5",
       Arch::Llama, 8, 14336, 1e-5, 500000},
      {"llama3-70b", 80, 8192, 64, 8192, 128256,
       "Llama 3 70B (Meta 2024; meta-llama/Meta-Llama-3-70B config.json): 70.6B, GQA 8 groups, ffn 28672, rope "
       "theta 500000, eps 1e-5",
       Arch::Llama, 8, 28672, 1e-5, 500000},
      {"llama3.1-405b", 126, 16384, 128, 8192, 128256,
       "Llama 3.1 405B (Meta 2024, The Llama 3 Herd of Models, Table 3; meta-llama/Llama-3.1-405B config.json): "
       "405.9B, GQA 8 groups, ffn 53248, rope theta 500000, eps 1e-5 (the rope scaling of the 128K context is not "
       "modelled)",
       Arch::Llama, 8, 53248, 1e-5, 500000},
  };
  return presets;
}

ModelConfig preset_config(const std::string& name) {
  for (const auto& p : model_presets()) {
    if (name == p.name) {
      ModelConfig c;
      c.name = p.name;
      c.layers = p.layers;
      c.hidden = p.hidden;
      c.heads = p.heads;
      c.seq_length = p.seq_length;
      c.vocab_size = p.vocab_size;
      c.arch = p.arch;
      c.query_groups = p.query_groups;
      c.ffn_hidden_size = p.ffn_hidden_size;
      c.layernorm_eps = p.norm_eps;
      c.rope_theta = p.rope_theta;
      return c;
    }
  }
  std::string names;
  for (const auto& p : model_presets()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  usage_error("--model '{}' is not a preset (presets: {})", name, names);
}

}  // namespace ptdp
