// Token element types of Megatron-LM indexed datasets, with the numeric codes that
// megatron/core/datasets/indexed_dataset.py (class DType) stores in the .idx header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ptdp {

// Values are Megatron's codes; do not renumber.
enum class TokenDType : uint8_t {
  U8 = 1, I8 = 2, I16 = 3, I32 = 4, I64 = 5, F64 = 6, F32 = 7, U16 = 8,
};

// The type for a code read from a file; nullopt for a code Megatron does not define.
std::optional<TokenDType> token_dtype_from_code(uint8_t code);
size_t token_dtype_size(TokenDType t);
std::string_view token_dtype_name(TokenDType t);  // numpy names: "uint8", "float64", ...
bool token_dtype_is_integer(TokenDType t);
// Smallest and largest token value the type can hold (integer types only).
int64_t token_dtype_min(TokenDType t);
int64_t token_dtype_max(TokenDType t);
// Megatron's DType.optimal_dtype: uint16 for vocabularies under 65500, else int32.
TokenDType token_dtype_for_vocab(int64_t vocab_size);

}  // namespace ptdp
