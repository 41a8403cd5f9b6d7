#include "core/data/gpt2_bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "core/common/utf8.h"
#include "core/data/gpt2_bpe_files.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/gpt2_bpe_fixtures.h"

namespace ptdp {
namespace {

using testing::TempDir;
using testing::usage_message;

void gpt2_write(const std::string& path, const std::string& text) {
  testing::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// vocab.json with the 256 byte tokens (ids 0..255) and `extra` after them, as JSON.
std::string gpt2_byte_vocab(const std::vector<std::string>& extra) {
  nlohmann::json v = nlohmann::json::object();
  for (const std::string& s : gpt2_byte_symbols()) {
    const size_t id = v.size();
    v[s] = id;
  }
  for (const std::string& s : extra) {
    const size_t id = v.size();
    v[s] = id;
  }
  return v.dump();
}

class Gpt2Bpe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
    fx_ = testing::read_gpt2_fixtures();
    tok_ = std::make_unique<Gpt2BpeTokenizer>(testing::gpt2_fixture("vocab.json"), testing::gpt2_fixture("merges.txt"));
  }
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    tok_->encode(text, ids);
    return ids;
  }
  // The text fed as preprocess feeds it: heads of at most `window` bytes (more when a head has no
  // stable cut), the rest encoded at the end.
  std::vector<int32_t> encode_in_heads(std::string_view text, size_t window) const {
    std::vector<int32_t> ids;
    for (size_t w = window; text.size() > w;) {
      const size_t used = tok_->encode_head(text.substr(0, w), ids);
      w = used == 0 ? 2 * w : window;
      text.remove_prefix(used);
    }
    tok_->encode(text, ids);
    return ids;
  }
  testing::Gpt2Fixtures fx_;
  std::unique_ptr<Gpt2BpeTokenizer> tok_;
};

// Contractions (and the uppercase ones the pattern misses), letters with and without a space in
// front, digits, punctuation runs, runs of spaces, tabs and line breaks, non-ASCII letters,
// emoji, combining marks, scripts the vocabulary never saw (single bytes), Unicode spaces: the
// ids of transformers' GPT2Tokenizer, exactly.
TEST_F(Gpt2Bpe, IdsEqualTransformersForEveryFixtureText) {
  ASSERT_GE(fx_.cases.size(), 30u);
  for (const testing::Gpt2Case& c : fx_.cases) EXPECT_EQ(encode(c.text), c.ids) << c.name;
  EXPECT_EQ(tok_->vocab_size(), fx_.vocab_size);
  EXPECT_EQ(tok_->eod_id(), fx_.eod);
  EXPECT_EQ(tok_->name(), "GPT-2 BPE (vocab.json, merges.txt)");
  EXPECT_FALSE(tok_->encodes_lines());
}

TEST_F(Gpt2Bpe, TheDocumentEqualsTransformersWholeAndInHeads) {
  const std::string text = testing::file_bytes(testing::gpt2_fixture("text.txt"));
  ASSERT_GT(text.size(), 4000u);
  EXPECT_EQ(encode(text), fx_.document_ids);
  for (const size_t window : {9, 10, 16, 33, 100, 1000})
    EXPECT_EQ(encode_in_heads(text, window), fx_.document_ids) << window;
}

// Texts of the characters where pieces meet (spaces of several kinds, line breaks, letters,
// digits, apostrophes of contractions, punctuation, multi-byte letters and emoji), encoded in
// heads of random sizes: the same ids as the whole text.
TEST_F(Gpt2Bpe, HeadsOfRandomSizesGiveTheWholeTextsIds) {
  const std::vector<std::string> alphabet = {
      " ", " ", "\n", "\t", "\r", "a", "Z", "s", "l", "1", "'", ".", "-",
      "\xc3\xa9", "\xf0\x9f\x98\x80", "\xc2\xa0", "\xe1\xa0\x8e", "\xe3\x80\x80"};  // é, 😀, NBSP, U+180E, U+3000
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::string text;
    while (text.size() < 3000) text += alphabet[rng() % alphabet.size()];
    const std::vector<int32_t> whole = encode(text);
    for (const size_t window : {size_t(9), size_t(12 + rng() % 50), size_t(64 + rng() % 500)})
      ASSERT_EQ(encode_in_heads(text, window), whole) << "round " << round << ", window " << window;
  }
}

// The same with bytes that are not UTF-8 among them: heads give encode()'s U+FFFD for them, and
// a character cut by the end of a head waits for the next.
TEST_F(Gpt2Bpe, HeadsOfTextThatIsNotUtf8GiveTheWholeTextsIds) {
  const std::vector<std::string> alphabet = {" ", "\n", "a", "1", "!", "\xc3\xa9", "\xf0\x9f\x98\x80", "\xff",
                                             "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf"};
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    std::string text;
    while (text.size() < 2000) text += alphabet[rng() % alphabet.size()];
    const std::vector<int32_t> whole = encode(text);
    ASSERT_EQ(tok_->decode(whole), replace_invalid_utf8(text));
    for (const size_t window : {size_t(9), size_t(10 + rng() % 90)})
      ASSERT_EQ(encode_in_heads(text, window), whole) << "round " << round << ", window " << window;
  }
}

TEST_F(Gpt2Bpe, AHeadIsCutOnlyInFrontOfACharacterThatIsNotASpace) {
  std::vector<int32_t> ids;
  EXPECT_EQ(tok_->encode_head("                  ", ids), 0u);  // a run of spaces may go on
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(tok_->encode_head("hello world and more", ids), 11u);  // " more": fewer than 8 bytes after it
  EXPECT_EQ(tok_->decode(ids), "hello world");
  ids.clear();
  EXPECT_EQ(tok_->encode_head("short", ids), 0u);
}

TEST_F(Gpt2Bpe, DecodingGivesTheTextBack) {
  for (const testing::Gpt2Case& c : fx_.cases)
    EXPECT_EQ(tok_->decode(encode(c.text)), replace_invalid_utf8(c.text)) << c.name;
  const std::string text = testing::file_bytes(testing::gpt2_fixture("text.txt"));
  EXPECT_EQ(tok_->decode(fx_.document_ids), text);
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{fx_.eod}), "<|endoftext|>");
  EXPECT_NE(usage_message([&] { tok_->decode(std::vector<int32_t>{int32_t(fx_.vocab_size)}); })
                .find("GPT-2 BPE token 1800 is outside the vocabulary (0..1799)"),
            std::string::npos);
}

// Megatron's GPT2BPETokenizer encodes "<|endoftext|>" in a text as its characters; transformers'
// encode() gives the special id there. ptdp does as Megatron does.
TEST_F(Gpt2Bpe, EndOfTextInsideTheTextIsPlainText) {
  const testing::Gpt2Case& c = fx_.at("endoftext_in_text");
  EXPECT_EQ(encode(c.text), c.ids);
  EXPECT_EQ(std::count(c.ids.begin(), c.ids.end(), fx_.eod), 0);
  EXPECT_EQ(std::count(c.transformers.begin(), c.transformers.end(), fx_.eod), 1);
}

// Bytes that are not UTF-8 become U+FFFD, one for each maximal ill-formed subpart, as the text
// transformers gets from Python's decode(errors='replace').
TEST_F(Gpt2Bpe, BytesThatAreNotUtf8AreEncodedAsReplacementCharacters) {
  const testing::Gpt2Case& c = fx_.at("invalid_utf8");
  ASSERT_NE(first_invalid_utf8(c.text), std::string_view::npos);
  EXPECT_EQ(encode(c.text), c.ids);
  EXPECT_EQ(encode(replace_invalid_utf8(c.text)), c.ids);
}

// Merges apply in rounds, one rank each, every occurrence from left to right, as in encoder.py;
// merging one occurrence at a time, lowest rank first, would give other tokens here, where a pair
// of lower rank ("aa a") needs a pair of higher rank ("a a") first. Expected ids from
// transformers' GPT2Tokenizer with these files. 300 letters also take the long-piece path.
TEST(Gpt2BpeMerges, ApplyInRoundsOfOneRankAsEncoderPyDoes) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  gpt2_write(dir.file("vocab.json"), gpt2_byte_vocab({"aa", "aaa", "aaaa"}));
  gpt2_write(dir.file("merges.txt"), "#version: 0.2\naa a\na a\naa aa\n");
  const Gpt2BpeTokenizer tok(dir.file("vocab.json"), dir.file("merges.txt"));
  const int32_t aa = 256, aaa = 257, aaaa = 258;
  const auto ids = [&](const std::string& text) {
    std::vector<int32_t> out;
    tok.encode(text, out);
    return out;
  };
  EXPECT_EQ(ids("aaaa"), (std::vector<int32_t>{aaaa}));
  EXPECT_EQ(ids("aaa"), (std::vector<int32_t>{aaa}));
  EXPECT_EQ(ids(std::string(9, 'a')), (std::vector<int32_t>{aaaa, aa, aaa}));
  EXPECT_EQ(ids(std::string(300, 'a')), std::vector<int32_t>(75, aaaa));
  EXPECT_EQ(tok.eod_id(), -1);
  EXPECT_EQ(tok.vocab_size(), 259);
}

TEST(Gpt2BpeFiles, TheByteAlphabetIsGpt2s) {
  const auto& s = gpt2_byte_symbols();
  EXPECT_EQ(s[' '], "\xc4\xa0");  // U+0120 'Ġ'
  EXPECT_EQ(s['\n'], "\xc4\x8a");  // U+010A 'Ċ'
  EXPECT_EQ(s['A'], "A");
  EXPECT_EQ(s[0], "\xc4\x80");     // U+0100
  EXPECT_EQ(s[0xAD], "\xc5\x83");  // U+0143, the last of the 68 moved bytes
  EXPECT_EQ(s[0xE9], "\xc3\xa9");  // 'é' stands for itself
}

// Bad files: one message naming the flag, the file (and the line) and the rule.
TEST(Gpt2BpeFiles, BadVocabulariesAreRefusedWithTheRule) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  gpt2_write(merges, "#version: 0.2\n");
  const auto refusal = [&](const std::string& text) {
    gpt2_write(vocab, text);
    return usage_message([&] { Gpt2BpeTokenizer(vocab, merges); });
  };
  const std::string bytes = gpt2_byte_vocab({});
  const std::string head = bytes.substr(0, bytes.size() - 1) + ",";  // the byte tokens, then more
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"a\": 1", "not JSON (at byte"},
      {"[1, 2]", "an array is not a JSON object of token -> id"},
      {"{}", "the object has no token"},
      {head + "\"xy\": \"256\"}", "token 'xy' has a string as its id"},
      {head + "\"xy\": 256.5}", "token 'xy' has a number that is not an integer as its id"},
      {head + "\"xy\": -1}", "token 'xy' has id -1"},
      {head + "\"xy\": 4294967296}", "token 'xy' has id 4294967296"},
      {head + "\"xy\": 300}", "token 'xy' has id 300, but 257 tokens have ids 0..256"},
      {head + "\"xy\": 5}", "tokens 'xy' and '\xc4\x85' both have id 5"},  // keys come in sorted order
      {"{\"a\": 0}", "no token for byte 0x00"},
  };
  for (const auto& [text, want] : cases) {
    const std::string msg = refusal(text);
    EXPECT_NE(msg.find("--vocab-file " + vocab + ": " + want), std::string::npos) << msg;
  }
  const std::string missing = usage_message([&] { Gpt2BpeTokenizer(dir.file("none.json"), merges); });
  EXPECT_NE(missing.find("--vocab-file " + dir.file("none.json") + ": No such file or directory"), std::string::npos)
      << missing;
  const std::string directory = usage_message([&] { Gpt2BpeTokenizer(dir.file(""), merges); });
  EXPECT_NE(directory.find("is a directory, not a file"), std::string::npos) << directory;
}

TEST(Gpt2BpeFiles, BadMergesAreRefusedNamingTheLine) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  gpt2_write(vocab, gpt2_byte_vocab({"ab", "abc"}));
  const auto refusal = [&](const std::string& text) {
    gpt2_write(merges, text);
    return usage_message([&] { Gpt2BpeTokenizer(vocab, merges); });
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#version: 0.2\na b\nab c d\n", "line 3: 'ab c d' is not a merge (two symbols separated by one space"},
      {"#version: 0.2\nabc\n", "line 2: 'abc' is not a merge"},
      {"a  b\n", "line 1: 'a  b' is not a merge"},
      {"a b\n#version: 0.2\n", "line 2: symbol '#version:' of '#version: 0.2' is not a token of --vocab-file " + vocab},
      {"a b\nab zz\n", "line 2: symbol 'zz' of 'ab zz' is not a token of --vocab-file"},
      {"b c\n", "line 1: 'b c' makes 'bc', which is not a token of --vocab-file " + vocab},
  };
  for (const auto& [text, want] : cases) {
    const std::string msg = refusal(text);
    EXPECT_NE(msg.find("--merge-file " + merges + " " + want), std::string::npos) << msg;
  }
  const std::string missing = usage_message([&] { Gpt2BpeTokenizer(vocab, dir.file("none.txt")); });
  EXPECT_NE(missing.find("--merge-file " + dir.file("none.txt") + ": No such file or directory"), std::string::npos)
      << missing;
}

// merges.txt as written on Windows (CRLF), without "#version", with empty lines: the merges are the
// same; a pair listed twice takes its last rank, as encoder.py's dict does.
TEST(Gpt2BpeFiles, MergeFilesReadAsEncoderPyReadsThem) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  gpt2_write(dir.file("merges.txt"), "#version: 0.2\r\na b\r\n\r\nab c\r\nb c\r\n");
  const std::vector<Gpt2MergeLine> m = read_gpt2_merges(dir.file("merges.txt"));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].left, "ab");
  EXPECT_EQ(m[1].right, "c");
  EXPECT_EQ(m[1].line, 4);
  EXPECT_EQ(m[2].right, "c");

  gpt2_write(dir.file("vocab.json"), gpt2_byte_vocab({"ab", "bc", "abc"}));
  const auto ids = [&](const std::string& merges) {
    gpt2_write(dir.file("merges.txt"), merges);
    const Gpt2BpeTokenizer tok(dir.file("vocab.json"), dir.file("merges.txt"));
    std::vector<int32_t> out;
    tok.encode("abc", out);
    return out;
  };
  const int32_t ab = 256, bc = 257, a = 'a', c = 'c';  // the byte tokens' ids are the bytes
  EXPECT_EQ(ids("a b\nb c\n"), (std::vector<int32_t>{ab, c}));
  EXPECT_EQ(ids("a b\nb c\na b\n"), (std::vector<int32_t>{a, bc}));  // "a b" now ranks after "b c"
}

TEST(Gpt2BpeFiles, ATokenOutsideTheByteAlphabetIsNotDecoded) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  gpt2_write(dir.file("vocab.json"), gpt2_byte_vocab({"<pad> x", "<|endoftext|>"}));
  gpt2_write(dir.file("merges.txt"), "");
  const Gpt2BpeTokenizer tok(dir.file("vocab.json"), dir.file("merges.txt"));
  EXPECT_EQ(tok.eod_id(), 257);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{257}), "<|endoftext|>");
  const std::string msg = usage_message([&] { tok.decode(std::vector<int32_t>{256}); });
  EXPECT_NE(msg.find("GPT-2 BPE token 256 ('<pad> x') is not written in GPT-2's byte characters"), std::string::npos)
      << msg;
}

TEST(Gpt2BpeFiles, WithoutPcre2TheTokenizerIsRefused) {
  if (gpt2_bpe_available()) GTEST_SKIP() << "this build has PCRE2";
  const std::string msg = usage_message([] { Gpt2BpeTokenizer("vocab.json", "merges.txt"); });
  EXPECT_NE(msg.find("--tokenizer-type GPT2BPETokenizer: this build has no PCRE2 (libpcre2-dev)"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace ptdp
