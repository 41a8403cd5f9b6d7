#include "core/data/tokenizer.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/data/gpt2_bpe_tokenizer.h"
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

namespace {

constexpr std::string_view kGpt2Type = "GPT2BPETokenizer";
constexpr std::array<std::string_view, 3> kSentencePieceTypes{"SentencePieceTokenizer", "GPTSentencePieceTokenizer",
                                                               "Llama2Tokenizer"};

}  // namespace

std::string known_tokenizer_types() {
  std::string names(kGpt2Type);
  for (const std::string_view t : kSentencePieceTypes) names.append(", ").append(t);
  return names;
}

TokenizerKind tokenizer_kind(const TokenizerOptions& o) {
  const bool sentencepiece =
      std::find(kSentencePieceTypes.begin(), kSentencePieceTypes.end(), o.type) != kSentencePieceTypes.end();
  if (o.type == kGpt2Type) {
    if (!o.model.empty())
      usage_error("--tokenizer-model is for SentencePiece models; --tokenizer-type GPT2BPETokenizer reads --vocab-file "
                  "and --merge-file");
    if (o.vocab_file.empty()) usage_error("--tokenizer-type GPT2BPETokenizer needs --vocab-file (GPT-2's vocab.json)");
    if (o.merge_file.empty()) usage_error("--tokenizer-type GPT2BPETokenizer needs --merge-file (GPT-2's merges.txt)");
    return TokenizerKind::Gpt2Bpe;
  }
  if (!o.type.empty() && !sentencepiece)
    usage_error("--tokenizer-type {}: unknown (known: {})", one_line(o.type), known_tokenizer_types());
  for (const auto& [flag, value] : {std::pair{"--vocab-file", &o.vocab_file}, std::pair{"--merge-file", &o.merge_file}})
    if (!value->empty())
      usage_error("{} is for --tokenizer-type GPT2BPETokenizer{}", flag,
                  o.type.empty() ? std::string(" (give that type too)") : ", not " + o.type);
  if (sentencepiece && o.model.empty())
    usage_error("--tokenizer-type {} needs --tokenizer-model (a SentencePiece .model file)", o.type);
  return o.model.empty() ? TokenizerKind::Bytes : TokenizerKind::SentencePiece;
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& opts) {
  switch (tokenizer_kind(opts)) {
    case TokenizerKind::Gpt2Bpe: return std::make_unique<Gpt2BpeTokenizer>(opts.vocab_file, opts.merge_file);
    case TokenizerKind::SentencePiece: return std::make_unique<SentencePieceTokenizer>(opts.model);
    case TokenizerKind::Bytes: break;
  }
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path) {
  TokenizerOptions opts;
  opts.model = model_path;
  return make_tokenizer(opts);
}

}  // namespace ptdp
