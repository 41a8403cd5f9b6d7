#include "core/common/one_line.h"
#include "core/common/utf8.h"

#include <gtest/gtest.h>

namespace ptdp {
namespace {

TEST(OneLine, EscapesLineBreaksTabsAndOtherControlCharacters) {
  EXPECT_EQ(one_line("a\nb\r\nc\td"), "a\\nb\\r\\nc\\td");
  EXPECT_EQ(one_line(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(one_line("\x1b[31m\x7f"), "\\x1b[31m\\x7f");
}

TEST(OneLine, KeepsPrintableTextBackslashesAndUtf8AsTheyAre) {
  EXPECT_EQ(one_line("gpus = 8 # \\n"), "gpus = 8 # \\n");
  EXPECT_EQ(one_line("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(one_line(""), "");
}

// Bytes that are not UTF-8 (Latin-1 text, a model file's raw bytes) are escaped, never printed raw;
// the validity rules are RFC 3629's.
TEST(OneLine, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(one_line("caf\xe9 ok"), "caf\\xe9 ok");                       // Latin-1
  EXPECT_EQ(one_line("\xc0\xaf"), "\\xc0\\xaf");                        // overlong '/'
  EXPECT_EQ(one_line("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(one_line("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(one_line("\xe2\x82"), "\\xe2\\x82");                        // cut short
  EXPECT_EQ(one_line("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");           // an emoji stays
  EXPECT_EQ(first_invalid_utf8("ab\xc3\xa9" "c\xff"), 5u);
  EXPECT_EQ(first_invalid_utf8("\xe2\x82\xac"), std::string_view::npos);
}

}  // namespace
}  // namespace ptdp
