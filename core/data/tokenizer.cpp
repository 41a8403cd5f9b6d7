#include "core/data/tokenizer.h"

#include "core/common/error.h"
#include "core/data/sentencepiece_tokenizer.h"

namespace ptdp {

void ByteTokenizer::encode(std::string_view text, std::vector<int32_t>& ids) const {
  ids.reserve(ids.size() + text.size());
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || id >= kByteVocabSize) usage_error("byte-level token {} is outside the vocabulary (0..255)", id);
    text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path) {
  if (model_path.empty()) return std::make_unique<ByteTokenizer>();
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

}  // namespace ptdp
