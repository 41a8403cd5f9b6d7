// Megatron-core's name for a dataset's index files: the MD5 of its unique_description
// (json.dumps(unique_identifiers, indent=4)), so that DIR/HASH-GPTDataset-train-*.npy written by
// ptdp and by Megatron-core (megatron/core/datasets/megatron_dataset.py, blended_dataset.py) name
// the same indices the same way.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/data/megatron_split.h"

namespace ptdp {

// What a GPTDataset's description holds (config fields as Megatron-core 0.16 keys them).
struct MegatronGptIdentity {
  std::string dataset_path;              // the prefix as given (--data-path), not resolved
  std::optional<int64_t> num_samples;    // nullopt: None (one epoch of a blend by size)
  MegatronSplit split = MegatronSplit::Train;
  uint64_t seed = 1234;
  int seq_len = 0;
  std::string split_text;                // --split as given, e.g. "969, 30, 1"
  std::array<double, 3> split_weights{};  // parse_megatron_split(split_text)
};

// The description texts, byte for byte Megatron's. `tokenizer_json` is the tokenizer's
// unique_identifiers as JSON ("null": none, which is what ptdp writes: it trains on token ids).
std::string megatron_gpt_description(const MegatronGptIdentity& id, std::string_view tokenizer_json = "null");
std::string megatron_blend_description(const std::vector<MegatronGptIdentity>& datasets, MegatronSplit split,
                                       const std::vector<double>& weights, int64_t size,
                                       std::string_view tokenizer_json = "null");

std::string md5_hex(std::string_view bytes);  // hashlib.md5(...).hexdigest()

// Whether a description found in a cache (Megatron's or ptdp's) is `ours` but for what no index
// depends on: the tokenizer and the spelling of --split (its bookends must agree). Dataset paths
// match when equal or when both name the same .idx file from here. False for text that is not
// a description.
bool same_indices(std::string_view theirs, std::string_view ours);

}  // namespace ptdp
