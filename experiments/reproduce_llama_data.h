// `ptdp reproduce llama-data`: LLaMA's pre-training mixture (Touvron et al. 2023, Table 1;
// experiments/specs/llama-data.toml) through Megatron's blending: the samples each source
// contributes to the training tokens, and the epochs that makes of it, against the table's.
#pragma once
#include <string>
#include <vector>

namespace ptdp {

struct LlamaDataSource {
  std::string name;
  double proportion = 0, disk_gb = 0, paper_epochs = 0;
};

struct LlamaDataSpec {
  std::string path, title;
  double train_tokens = 0, dataset_tokens = 0;
  int seq_length = 0;
  std::vector<LlamaDataSource> sources;
};

// Parses llama-data.toml; UsageError naming the file and key on bad input.
LlamaDataSpec parse_llama_data_spec(const std::string& text, const std::string& path);

// One source's outcome: Megatron's blend of train_tokens / seq_length samples.
struct LlamaDataRow {
  LlamaDataSource source;
  int64_t samples = 0;          // the blend's target samples from this source
  double tokens = 0;            // the source's tokens: its disk size at the dataset's tokens per byte
  double epochs = 0;            // samples * seq_length / tokens
  double tokens_per_byte = 0;   // what the paper's epochs imply for this source
};
std::vector<LlamaDataRow> llama_data_rows(const LlamaDataSpec& spec);

// `spec`: "llama-data" or a .toml path. Prints the table and writes `csv` (rewritten atomically).
// `dry_run`: prints the spec only.
int reproduce_llama_data(const std::string& spec, const std::string& csv, bool dry_run);

}  // namespace ptdp
