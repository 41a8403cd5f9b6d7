// Tokenizers of `ptdp preprocess`: text -> token ids. Two kinds: byte-level (token = byte value,
// vocabulary 256, needs no model file) and SentencePiece (a .model file such as LLaMA's
// tokenizer.model, Megatron's --tokenizer-model; core/data/sentencepiece_tokenizer.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ptdp {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // For messages: "byte-level", "SentencePiece BPE (tokenizer.model)".
  virtual std::string name() const = 0;
  // Every id encode() returns is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // Appends the ids of `text` to `ids`.
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;
  // The text of `ids` (ids outside the vocabulary are a UsageError).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The end-of-document id that Megatron's --append-eod appends after each document (the
  // model's eos), or -1 when the tokenizer has none (byte-level: all 256 ids are bytes).
  virtual int32_t eod_id() const = 0;
  // How preprocess feeds the text: false, in pieces cut anywhere (byte-level: every byte is a
  // token on its own); true, one line at a time without its line break, as spm_encode does.
  virtual bool encodes_lines() const = 0;

  // How a line too long to encode at once can be cut at a single space between two words and
  // still give the whole line's tokens: Drop (the space becomes the next piece's dummy prefix),
  // Keep (the next piece starts with the space), or None (this model's pieces may depend on the
  // text across a space). Only for encodes_lines() tokenizers.
  enum class SpaceCut { Drop, Keep, None };
  virtual SpaceCut space_cut() const { return SpaceCut::None; }
};

// Vocabulary of the byte-level tokenizer: token = byte value, 0..255.
inline constexpr int64_t kByteVocabSize = 256;

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte-level"; }
  int64_t vocab_size() const override { return kByteVocabSize; }
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t eod_id() const override { return -1; }
  bool encodes_lines() const override { return false; }
};

// The tokenizer of `ptdp preprocess --tokenizer-model MODEL_PATH`: byte-level when MODEL_PATH
// is empty, else the SentencePiece model in that file. Errors (UsageError) name the flag
// "--tokenizer-model": the file is missing or not a regular file, is not a SentencePiece model,
// or this build has no SentencePiece.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path);

}  // namespace ptdp
