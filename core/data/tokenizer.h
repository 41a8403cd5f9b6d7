// Tokenizers of `ptdp preprocess`: text -> token ids. Three kinds: byte-level (token = byte value,
// vocabulary 256, needs no file), GPT-2's byte-level BPE (Megatron's --tokenizer-type
// GPT2BPETokenizer with --vocab-file vocab.json --merge-file merges.txt;
// core/data/gpt2_bpe_tokenizer.h) and SentencePiece (a .model file such as LLaMA's tokenizer.model,
// Megatron's --tokenizer-model; core/data/sentencepiece_tokenizer.h).
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
  // For messages: "byte-level", "GPT-2 BPE (vocab.json, merges.txt)", "SentencePiece (tokenizer.model)".
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
  // The beginning-of-sequence id a model's config names (Hugging Face's bos_token_id), or -1:
  // the eod id unless the tokenizer has its own (SentencePiece's bos; GPT-2's is <|endoftext|>).
  virtual int32_t bos_id() const { return eod_id(); }
  // How preprocess feeds the text: false, as one text in pieces (encode_head); true, one line at a
  // time without its line break, as spm_encode does.
  virtual bool encodes_lines() const = 0;
  // `text` is the head of a longer text: encodes the longest head of it whose ids are the same
  // whatever follows, appends them to `ids` and returns its length in bytes (0: none yet, more text
  // is needed). Byte-level: all of it (every byte is a token on its own).
  virtual size_t encode_head(std::string_view text, std::vector<int32_t>& ids) const {
    encode(text, ids);
    return text.size();
  }

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

// The tokenizer flags of `ptdp preprocess`, Megatron's names.
struct TokenizerOptions {
  // --tokenizer-type: GPT2BPETokenizer, or SentencePieceTokenizer, GPTSentencePieceTokenizer and
  // Llama2Tokenizer, three names of ptdp's one SentencePiece tokenizer; empty: SentencePiece when
  // `model` is given, else byte-level.
  std::string type;
  std::string model;       // --tokenizer-model: a SentencePiece .model file
  std::string vocab_file;  // --vocab-file: GPT-2's vocab.json
  std::string merge_file;  // --merge-file: GPT-2's merges.txt
};

enum class TokenizerKind { Bytes, SentencePiece, Gpt2Bpe };

// Megatron's --tokenizer-type names that ptdp knows, for messages: "GPT2BPETokenizer, ...".
std::string known_tokenizer_types();

// The kind of tokenizer the flags name. UsageError, naming the flags: an unknown --tokenizer-type
// (listing the known ones); GPT2BPETokenizer without --vocab-file or --merge-file, or with
// --tokenizer-model; a SentencePiece type without --tokenizer-model, or with --vocab-file or
// --merge-file; --vocab-file or --merge-file without --tokenizer-type GPT2BPETokenizer.
TokenizerKind tokenizer_kind(const TokenizerOptions& opts);

// The tokenizer the flags name (tokenizer_kind), loaded from its files. UsageError naming the
// flag and the file: a file is missing or not a regular file, is not what the flag reads (not a
// SentencePiece model, not GPT-2's vocab.json or merges.txt), or this build lacks the library
// (SentencePiece; PCRE2 for GPT-2 BPE).
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& opts);

// make_tokenizer with --tokenizer-model MODEL_PATH alone: byte-level when it is empty.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path);

}  // namespace ptdp
