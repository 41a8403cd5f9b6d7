#include "core/common/utf8.h"

#include <gtest/gtest.h>

namespace ptdp {
namespace {

// One U+FFFD per maximal subpart, as Python's bytes.decode('utf-8', errors='replace'):
// b"\xe2\x82" (cut short) is one, a surrogate's three bytes are three (0xED allows 0x80-0x9F
// next), an overlong '/' is two.
TEST(Utf8, InvalidSequencesAreReplacedAsPythonReplacesThem) {
  const std::string r(kUtf8Replacement);
  EXPECT_EQ(replace_invalid_utf8("caf\xe9!"), "caf" + r + "!");
  EXPECT_EQ(replace_invalid_utf8("a\xe2\x82z"), "a" + r + "z");
  EXPECT_EQ(replace_invalid_utf8("\xed\xa0\x80"), r + r + r);
  EXPECT_EQ(replace_invalid_utf8("\xc0\xaf"), r + r);
  EXPECT_EQ(replace_invalid_utf8("\xf0\x9f\x98 ok"), r + " ok");
  EXPECT_EQ(replace_invalid_utf8("\xf4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(replace_invalid_utf8("\xff\xfe"), r + r);
  EXPECT_EQ(replace_invalid_utf8("\xe2\x82"), r);  // cut short at the end
  EXPECT_EQ(replace_invalid_utf8("\xf0\x9f\x98\x80 \xe2\x82\xac"), "\xf0\x9f\x98\x80 \xe2\x82\xac");
  EXPECT_EQ(replace_invalid_utf8(""), "");
}

TEST(Utf8, MaximalSubpartIsTheHeadThatMoreBytesCouldComplete) {
  EXPECT_EQ(utf8_maximal_subpart("\xf0\x9f\x98"), 3u);  // the whole text: more bytes may follow
  EXPECT_EQ(utf8_maximal_subpart("\xf0\x9f\x98\x80"), 4u);
  EXPECT_EQ(utf8_maximal_subpart("\xf0\x9fz"), 2u);
  EXPECT_EQ(utf8_maximal_subpart("\x80"), 1u);
  EXPECT_EQ(utf8_maximal_subpart("a"), 1u);
  EXPECT_EQ(utf8_maximal_subpart(""), 0u);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x98"), 0u);
  EXPECT_EQ(utf8_sequence_length("\xc3\xa9"), 2u);
}

TEST(Utf8, CutTailIsASequenceMoreBytesCouldComplete) {
  EXPECT_EQ(utf8_cut_tail("ok \xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8_cut_tail("ok \xe2\x82"), 2u);
  EXPECT_EQ(utf8_cut_tail("ok \xc3"), 1u);
  EXPECT_EQ(utf8_cut_tail("ok \xf0\x9f\x98\x80"), 0u);  // whole
  EXPECT_EQ(utf8_cut_tail("ok \xff"), 0u);                  // never valid
  EXPECT_EQ(utf8_cut_tail("ok \xed\xa0"), 0u);              // a surrogate
  EXPECT_EQ(utf8_cut_tail("ok \xc3\xa9"), 0u);
  EXPECT_EQ(utf8_cut_tail("\x80\x80\x80"), 0u);
  EXPECT_EQ(utf8_cut_tail(""), 0u);
}

TEST(Utf8, CodePointsRoundTripThroughEveryLength) {
  for (const char32_t c : {char32_t(0x24), char32_t(0x7F), char32_t(0x80), char32_t(0xA3), char32_t(0x7FF),
                           char32_t(0x800), char32_t(0x20AC), char32_t(0xFFFD), char32_t(0x10000),
                           char32_t(0x1F600), char32_t(0x10FFFF)}) {
    std::string s;
    append_utf8(s, c);
    EXPECT_EQ(utf8_sequence_length(s), s.size()) << uint32_t(c);
    EXPECT_EQ(utf8_first_code_point(s + "x"), c) << uint32_t(c);
  }
  std::string euro;
  append_utf8(euro, 0x20AC);
  EXPECT_EQ(euro, "\xE2\x82\xAC");
}

}  // namespace
}  // namespace ptdp
