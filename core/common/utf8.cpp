#include "core/common/utf8.h"

#include <string_view>

namespace ptdp {
namespace {

// What a lead byte starts: the sequence's length (0: not a lead byte) and the allowed range of the
// second byte (RFC 3629's table: no overlong forms, no surrogates, nothing above U+10FFFF).
struct Utf8Lead {
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;
};

Utf8Lead utf8_lead(unsigned char c) {
  if (c < 0x80) return {1};
  if (c >= 0xC2 && c <= 0xDF) return {2};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  if (c >= 0xF1 && c <= 0xF3) return {4};
  return {};
}

}  // namespace

size_t utf8_maximal_subpart(std::string_view t) {
  if (t.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(t[i]); };
  const Utf8Lead lead = utf8_lead(b(0));
  if (lead.length <= 1 || t.size() < 2 || b(1) < lead.lo || b(1) > lead.hi) return 1;
  size_t n = 2;
  while (n < lead.length && n < t.size() && b(n) >= 0x80 && b(n) <= 0xBF) ++n;
  return n;
}

size_t utf8_sequence_length(std::string_view t) {
  if (t.empty()) return 0;
  const size_t n = utf8_lead(static_cast<unsigned char>(t[0])).length;
  return n != 0 && utf8_maximal_subpart(t) == n ? n : 0;
}

size_t first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII runs, the common case, a byte at a time without the table above.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(text.substr(i));
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

size_t utf8_cut_tail(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const std::string_view tail = text.substr(text.size() - back);
    const auto c = static_cast<unsigned char>(tail[0]);
    if (c >= 0x80 && c <= 0xBF) continue;  // a continuation byte: the lead is further back
    return utf8_lead(c).length > back && utf8_maximal_subpart(tail) == back ? back : 0;
  }
  return 0;
}

char32_t utf8_first_code_point(std::string_view t) {
  const auto b = [&](size_t i) { return char32_t(static_cast<unsigned char>(t[i])); };
  switch (utf8_lead(static_cast<unsigned char>(t[0])).length) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
    case 3: return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
  }
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos; bad = first_invalid_utf8(text)) {
    out.append(text.substr(0, bad)).append(kUtf8Replacement);
    text.remove_prefix(bad + utf8_maximal_subpart(text.substr(bad)));
  }
  return out.append(text);
}

}  // namespace ptdp
