#include "core/common/one_line.h"

#include <fmt/format.h>

#include "core/common/utf8.h"

namespace ptdp {

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {  // a valid UTF-8 character as it is; a byte that starts none as \xNN
      const size_t n = utf8_sequence_length(text.substr(i));
      if (n == 0) out += fmt::format("\\x{:02x}", c);
      else out.append(text.substr(i, n));
      i += n ? n : 1;
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
    ++i;
  }
  return out;
}

}  // namespace ptdp
