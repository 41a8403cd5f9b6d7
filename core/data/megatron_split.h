// Megatron's train/valid/test split (--split "949,50,1"), applied to the sequences of an
// indexed dataset as Megatron-core applies it (parse_and_normalize_split,
// convert_split_vector_to_split_matrix, and round(fraction * count) per bookend).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ptdp {

enum class MegatronSplit { Train = 0, Valid = 1, Test = 2 };
const char* megatron_split_name(MegatronSplit s);  // "train", "valid", "test" (Megatron's Split.name)

// 1 to 3 non-negative decimal weights separated by ',' (or '/', spaces around them allowed),
// missing ones 0, not all 0;
// normalised with numpy's sum. UsageError naming `flag` and the rule otherwise.
std::array<double, 3> parse_megatron_split(std::string_view text, std::string_view flag = "--split");

// The sequences [begin, end) of the split among num_sequences, or nullopt where Megatron builds
// no dataset for it (its bookends are empty).
struct SequenceRange {
  int64_t begin = 0, end = 0;
};
std::optional<SequenceRange> megatron_split_range(const std::array<double, 3>& split, MegatronSplit which,
                                                  int64_t num_sequences);

}  // namespace ptdp
