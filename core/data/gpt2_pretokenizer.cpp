#include "core/data/gpt2_pretokenizer.h"

#include <fmt/format.h>

#include <array>
#include <string>

#include "core/common/error.h"
#include "core/common/utf8.h"

#ifdef PTDP_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace ptdp {
namespace {

// Unicode's White_Space, as ranges of code points.
constexpr std::array<std::array<char32_t, 2>, 10> kGpt2Spaces{{{0x09, 0x0D},
                                                               {0x20, 0x20},
                                                               {0x85, 0x85},
                                                               {0xA0, 0xA0},
                                                               {0x1680, 0x1680},
                                                               {0x2000, 0x200A},
                                                               {0x2028, 0x2029},
                                                               {0x202F, 0x202F},
                                                               {0x205F, 0x205F},
                                                               {0x3000, 0x3000}}};

}  // namespace

bool gpt2_is_space(char32_t c) {
  for (const auto& [lo, hi] : kGpt2Spaces)
    if (c >= lo && c <= hi) return true;
  return false;
}

// Why a piece boundary k is stable once two characters follow it, when the character at k or the
// one after it is not a space: every piece is one alternative of the regex, a run of one class
// (letters, digits, other non-spaces, spaces; the first three may take one space in front), and
// where a piece ends decides where the next starts. Each piece before k was decided by the
// characters up to the one after its end, so at most k + 1 (a run of spaces that reaches k ends at
// k or k + 1, as one of those is not a space, and its lookahead (?!\S) reads the character after
// the run), and by the contractions' look at three characters from its start, again at most
// k + 1. The longer text has the same characters there, so it has the same pieces before k; the
// regex, which has no lookbehind, finds the same pieces from k on in the rest alone.
size_t gpt2_stable_head(std::string_view text, std::span<const size_t> ends) {
  constexpr size_t kFollowing = 8;  // bytes that hold at least two characters
  for (auto it = ends.rbegin(); it != ends.rend(); ++it) {
    const size_t k = *it;
    if (k == 0) break;
    if (k + kFollowing > text.size()) continue;
    const std::string_view at = text.substr(k), next = at.substr(utf8_sequence_length(at));
    if (!gpt2_is_space(utf8_first_code_point(at)) || !gpt2_is_space(utf8_first_code_point(next))) return k;
  }
  return 0;
}

#ifdef PTDP_HAVE_PCRE2

bool gpt2_bpe_available() { return true; }

struct Gpt2Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

namespace {

std::string gpt2_pattern() {
  std::string s;  // the class of White_Space, without brackets
  for (const auto& [lo, hi] : kGpt2Spaces)
    s += lo == hi ? fmt::format("\\x{{{:X}}}", uint32_t(lo))
                  : fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", uint32_t(lo), uint32_t(hi));
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s + "])|[" + s +
         "]+";
}

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buf{};
  pcre2_get_error_message(code, buf.data(), buf.size());
  return reinterpret_cast<const char*>(buf.data());
}

}  // namespace

Gpt2Pretokenizer::Gpt2Pretokenizer() : impl_(std::make_unique<Impl>()) {
  const std::string pattern = gpt2_pattern();
  int err = 0;
  PCRE2_SIZE at = 0;
  // Anchored: each piece starts where the last ended (every character starts a match, so this
  // equals a search), and the JIT code keeps that without a match-time option.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &at, nullptr);
  if (impl_->code == nullptr)
    throw RuntimeError(fmt::format("GPT-2 pre-tokenizer: PCRE2 refuses the pattern at {}: {}", at, pcre2_message(err)));
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // where the JIT is missing, the interpreter runs
}

Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

void Gpt2Pretokenizer::split(std::string_view text, std::vector<size_t>& ends) const {
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), pcre2_match_data_free);
  if (md == nullptr) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t at = 0; at < text.size();) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc < 0)
      throw RuntimeError(fmt::format("GPT-2 pre-tokenizer: PCRE2 match failed at byte {}: {}", at, pcre2_message(rc)));
    const size_t end = pcre2_get_ovector_pointer(md.get())[1];
    if (end <= at) throw RuntimeError(fmt::format("GPT-2 pre-tokenizer: empty piece at byte {}", at));
    ends.push_back(end);
    at = end;
  }
}

#else  // no PCRE2 in this build

bool gpt2_bpe_available() { return false; }

struct Gpt2Pretokenizer::Impl {};

Gpt2Pretokenizer::Gpt2Pretokenizer() { throw RuntimeError("GPT-2 pre-tokenizer: this build has no PCRE2"); }
Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;
void Gpt2Pretokenizer::split(std::string_view, std::vector<size_t>&) const {}

#endif

}  // namespace ptdp
