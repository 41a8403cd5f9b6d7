// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), and the
// replacement of what is not valid, as Python's bytes.decode('utf-8', errors='replace') does it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ptdp {

// The length of the valid UTF-8 sequence that starts text[0], or 0 when text[0] starts none
// (a stray continuation byte, an overlong form, a surrogate, a sequence cut short).
size_t utf8_sequence_length(std::string_view text);

// The offset of the first byte that is not part of a valid UTF-8 sequence, or npos.
size_t first_invalid_utf8(std::string_view text);

// The length of the longest head of `text` that begins a valid UTF-8 sequence, at least 1 for a
// text that is not empty: where text[0] starts no valid sequence, the bytes that one U+FFFD
// replaces (Unicode's "maximal subpart", what Python replaces with errors='replace'). Equal to
// text.size() when the text ends inside a sequence that more bytes could complete.
size_t utf8_maximal_subpart(std::string_view text);

// The length of the sequence that the end of `text` cuts short: 1 to 3 bytes that begin a valid
// sequence more bytes could complete, or 0 (text ends with a whole character, or with bytes that
// no continuation makes valid).
size_t utf8_cut_tail(std::string_view text);

// `text` with each maximal subpart that is not valid UTF-8 replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view text);

// The code point that starts `text`, which begins with a valid sequence (utf8_sequence_length > 0).
char32_t utf8_first_code_point(std::string_view text);

// Appends the UTF-8 sequence of code point `c` (at most U+10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t c);

// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

}  // namespace ptdp
