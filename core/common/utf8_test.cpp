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

}  // namespace
}  // namespace ptdp
