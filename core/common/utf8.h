// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
#pragma once
#include <cstddef>
#include <string_view>

namespace ptdp {

// The length of the valid UTF-8 sequence that starts text[0], or 0 when text[0] starts none
// (a stray continuation byte, an overlong form, a surrogate, a sequence cut short).
size_t utf8_sequence_length(std::string_view text);

// The offset of the first byte that is not part of a valid UTF-8 sequence, or npos.
size_t first_invalid_utf8(std::string_view text);

}  // namespace ptdp
