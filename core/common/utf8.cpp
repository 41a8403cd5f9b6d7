#include "core/common/utf8.h"

#include <string_view>

namespace ptdp {

size_t utf8_sequence_length(std::string_view t) {
  if (t.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(t[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c == 0xED) n = 3, hi = 0x9F;  // no surrogates
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c == 0xF4) n = 4, hi = 0x8F;  // nothing above U+10FFFF
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else return 0;
  if (t.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
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

}  // namespace ptdp
