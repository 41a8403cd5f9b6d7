// GPT-2's pre-tokenizer: a text cut into the pieces that byte-level BPE encodes one at a time, by
// the regex of OpenAI's encoder.py, through PCRE2 (Debian's libpcre2-dev):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// \s is Unicode's White_Space, the set of Python's regex module (PCRE2's own \s adds U+180E).
// Letters and digits are those of the Unicode tables of the system's PCRE2 (10.42: Unicode 14).
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace ptdp {

// Whether this build links PCRE2 (without it GPT-2 BPE is refused).
bool gpt2_bpe_available();

class Gpt2Pretokenizer {
 public:
  Gpt2Pretokenizer();  // RuntimeError in a build without PCRE2
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // Appends the end offset of each piece of `text` (valid UTF-8: not checked) to `ends`, in
  // order; the pieces cover the text, so the last end is text.size().
  void split(std::string_view text, std::vector<size_t>& ends) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `c` is White_Space (the \s above).
bool gpt2_is_space(char32_t c);

// `text` is the head of a longer text and `ends` its pieces (split). The largest piece boundary k
// such that the pieces of the longer text, whatever follows `text`, are text[0, k)'s pieces and
// then those of the rest from k; 0 when there is none yet. Such a k has two characters after it
// in `text`, one of them (at k or k + 1) not a space: a cut in front of a line, a word (" the"),
// a number or punctuation.
size_t gpt2_stable_head(std::string_view text, std::span<const size_t> ends);

}  // namespace ptdp
