// A SentencePiece tokenizer (BPE or unigram .model file, e.g. LLaMA's tokenizer.model, vocabulary
// 32000) through libsentencepiece (Debian's libsentencepiece-dev). In a build configured without
// that library the constructor refuses every model with "this build has no SentencePiece".
#pragma once
#include <memory>
#include <string>

#include "core/data/tokenizer.h"

namespace ptdp {

// Whether this build links libsentencepiece.
bool sentencepiece_available();

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads the model in `model_path`. UsageError naming "--tokenizer-model": the file is missing,
  // not a regular file or unreadable; it is not a SentencePiece model (it does not parse, or has
  // no pieces); this build has no SentencePiece.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::string name() const override;  // "SentencePiece BPE (FILE NAME)"
  int64_t vocab_size() const override;
  // Encodes as spm_encode --output_format=id does one line (the model's normalisation included).
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t eod_id() const override;  // the model's eos id; -1 when the model has none
  int32_t bos_id() const override;  // the model's bos id; -1 when the model has none
  bool encodes_lines() const override { return true; }
  // Found when the model loads, by encoding a few texts whole and cut at their spaces.
  SpaceCut space_cut() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptdp
