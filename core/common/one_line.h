// Text taken from the user's input (file contents, flag values) made safe to quote in a one-line
// error message: control characters are escaped, so a message never spans several lines.
#pragma once
#include <string>
#include <string_view>

namespace ptdp {

// `text` with \n, \r, \t written as such and every other control character (and DEL) as \xNN,
// and so every byte that is not part of valid UTF-8 (Latin-1 text, random bytes from a file);
// everything else, backslashes and valid UTF-8 included, as it is.
std::string one_line(std::string_view text);

}  // namespace ptdp
