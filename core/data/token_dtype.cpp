#include "core/data/token_dtype.h"

#include <limits>

#include "core/common/error.h"

namespace ptdp {

std::optional<TokenDType> token_dtype_from_code(uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<TokenDType>(code);
}

size_t token_dtype_size(TokenDType t) {
  switch (t) {
    case TokenDType::U8: case TokenDType::I8: return 1;
    case TokenDType::I16: case TokenDType::U16: return 2;
    case TokenDType::I32: case TokenDType::F32: return 4;
    case TokenDType::I64: case TokenDType::F64: return 8;
  }
  PTDP_CHECK(false, "bad TokenDType {}", static_cast<int>(t));
}

std::string_view token_dtype_name(TokenDType t) {
  switch (t) {
    case TokenDType::U8: return "uint8";
    case TokenDType::I8: return "int8";
    case TokenDType::I16: return "int16";
    case TokenDType::I32: return "int32";
    case TokenDType::I64: return "int64";
    case TokenDType::F64: return "float64";
    case TokenDType::F32: return "float32";
    case TokenDType::U16: return "uint16";
  }
  PTDP_CHECK(false, "bad TokenDType {}", static_cast<int>(t));
}

bool token_dtype_is_integer(TokenDType t) { return t != TokenDType::F32 && t != TokenDType::F64; }

int64_t token_dtype_min(TokenDType t) {
  switch (t) {
    case TokenDType::U8: case TokenDType::U16: return 0;
    case TokenDType::I8: return std::numeric_limits<int8_t>::min();
    case TokenDType::I16: return std::numeric_limits<int16_t>::min();
    case TokenDType::I32: return std::numeric_limits<int32_t>::min();
    case TokenDType::I64: return std::numeric_limits<int64_t>::min();
    default: PTDP_CHECK(false, "{} is not an integer token type", token_dtype_name(t));
  }
}

int64_t token_dtype_max(TokenDType t) {
  switch (t) {
    case TokenDType::U8: return std::numeric_limits<uint8_t>::max();
    case TokenDType::U16: return std::numeric_limits<uint16_t>::max();
    case TokenDType::I8: return std::numeric_limits<int8_t>::max();
    case TokenDType::I16: return std::numeric_limits<int16_t>::max();
    case TokenDType::I32: return std::numeric_limits<int32_t>::max();
    case TokenDType::I64: return std::numeric_limits<int64_t>::max();
    default: PTDP_CHECK(false, "{} is not an integer token type", token_dtype_name(t));
  }
}

TokenDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::U16 : TokenDType::I32;
}

}  // namespace ptdp
