#include "core/common/one_line.h"

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

}  // namespace
}  // namespace ptdp
