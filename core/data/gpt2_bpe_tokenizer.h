// GPT-2's byte-level BPE, Megatron's --tokenizer-type GPT2BPETokenizer: vocab.json and merges.txt
// (core/data/gpt2_bpe_files.h) encode text to the ids that Hugging Face transformers'
// GPT2Tokenizer, OpenAI's encoder.py and Megatron give. The text is cut into pieces by GPT-2's
// pre-tokenizer (core/data/gpt2_pretokenizer.h), each piece's bytes are written as GPT-2's byte
// characters, and the merges apply lowest rank first, every occurrence of a pair at once from left
// to right, until none applies; the ids of each piece are cached. "<|endoftext|>" inside the text
// is plain text, as in Megatron (transformers' encode() gives its special id there instead).
#pragma once
#include <memory>
#include <string>

#include "core/data/tokenizer.h"

namespace ptdp {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // UsageError: the files' errors (gpt2_bpe_files.h); vocab.json without a token for each of the
  // 256 bytes; a merge whose symbols, or whose joined result, are not tokens of vocab.json (named by
  // --merge-file and its line); a build without PCRE2 ("this build has no PCRE2 (libpcre2-dev)").
  // A pair that merges.txt lists twice takes its last rank, as encoder.py's dict does.
  Gpt2BpeTokenizer(const std::string& vocab_file, const std::string& merge_file);
  ~Gpt2BpeTokenizer() override;

  std::string name() const override;  // "GPT-2 BPE (vocab.json, merges.txt)": the files' names
  int64_t vocab_size() const override;  // the number of tokens (ids 0..N-1)
  // Bytes that are not UTF-8 are encoded as U+FFFD, one for each maximal ill-formed subpart, as
  // transformers sees text that Python decoded with errors='replace'. Safe to call from several
  // threads (one at a time: the piece cache is shared).
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  // Cuts after the last piece that the pre-tokenizer makes whatever follows (gpt2_stable_head). A
  // character cut by the end of `text` is left for the next call; other bytes that are not UTF-8
  // are encoded as encode() does.
  size_t encode_head(std::string_view text, std::vector<int32_t>& ids) const override;
  // The tokens' bytes. UsageError: an id outside the vocabulary, or a token that is not GPT-2
  // byte characters (a special token of another alphabet).
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t eod_id() const override;  // the id of <|endoftext|>; -1 when vocab.json has none
  bool encodes_lines() const override { return false; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptdp
