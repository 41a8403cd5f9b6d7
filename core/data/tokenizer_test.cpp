#include "core/data/tokenizer.h"

#include <gtest/gtest.h>

#include "core/data/sentencepiece_tokenizer.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/gpt2_bpe_fixtures.h"
#include "core/data/testing/spm_tokenizer_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;
using testing::usage_message;

TEST(ByteTokenizer, EveryByteIsItsOwnTokenAndDecodesBack) {
  const ByteTokenizer tok;
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  std::vector<int32_t> ids{7};  // encode appends
  tok.encode(text, ids);
  ASSERT_EQ(ids.size(), 257u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[size_t(b) + 1], b);
  EXPECT_EQ(tok.decode(std::span(ids).subspan(1)), text);
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.eod_id(), -1);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_FALSE(tok.encodes_lines());
  EXPECT_EQ(tok.name(), "byte-level");
  EXPECT_THROW(tok.decode(std::vector<int32_t>{256}), UsageError);
}

TEST(Tokenizer, NoModelMeansByteLevel) {
  const auto tok = make_tokenizer("");
  EXPECT_EQ(tok->name(), "byte-level");
  EXPECT_EQ(tok->vocab_size(), kByteVocabSize);
}

// Megatron's flag names: --tokenizer-type picks the tokenizer, and each file flag goes with its
// type; flags that do not go together are refused naming them.
TEST(Tokenizer, TypeAndFileFlagsMustGoTogether) {
  const auto kind_error = [](const TokenizerOptions& o) { return usage_message([&] { tokenizer_kind(o); }); };
  EXPECT_EQ(tokenizer_kind({}), TokenizerKind::Bytes);
  EXPECT_EQ(tokenizer_kind({"", "m.model", "", ""}), TokenizerKind::SentencePiece);
  for (const char* type : {"SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer"})
    EXPECT_EQ(tokenizer_kind({type, "m.model", "", ""}), TokenizerKind::SentencePiece) << type;
  EXPECT_EQ(tokenizer_kind({"GPT2BPETokenizer", "", "v.json", "m.txt"}), TokenizerKind::Gpt2Bpe);
  const std::vector<std::pair<TokenizerOptions, std::string>> refused = {
      {{"BertWordPieceCase", "", "", ""},
       "--tokenizer-type BertWordPieceCase: unknown (known: GPT2BPETokenizer, SentencePieceTokenizer, "
       "GPTSentencePieceTokenizer, Llama2Tokenizer)"},
      {{"GPT2BPETokenizer", "", "", "m.txt"}, "--tokenizer-type GPT2BPETokenizer needs --vocab-file"},
      {{"GPT2BPETokenizer", "", "v.json", ""}, "--tokenizer-type GPT2BPETokenizer needs --merge-file"},
      {{"GPT2BPETokenizer", "m.model", "v.json", "m.txt"}, "--tokenizer-model is for SentencePiece models"},
      {{"", "", "v.json", ""}, "--vocab-file is for --tokenizer-type GPT2BPETokenizer (give that type too)"},
      {{"", "", "", "m.txt"}, "--merge-file is for --tokenizer-type GPT2BPETokenizer"},
      {{"Llama2Tokenizer", "m.model", "v.json", ""},
       "--vocab-file is for --tokenizer-type GPT2BPETokenizer, not Llama2Tokenizer"},
      {{"Llama2Tokenizer", "", "", ""}, "--tokenizer-type Llama2Tokenizer needs --tokenizer-model"},
  };
  for (const auto& [opts, want] : refused) {
    const std::string msg = kind_error(opts);
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

TEST(Tokenizer, Gpt2TypeLoadsTheVocabularyAndMerges) {
  if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto tok = make_tokenizer(TokenizerOptions{"GPT2BPETokenizer", "", testing::gpt2_fixture("vocab.json"),
                                                   testing::gpt2_fixture("merges.txt")});
  EXPECT_EQ(tok->name(), "GPT-2 BPE (vocab.json, merges.txt)");
  EXPECT_EQ(tok->vocab_size(), 1800);
  EXPECT_EQ(tok->eod_id(), 1799);
  EXPECT_EQ(tok->bos_id(), 1799);  // GPT-2's bos is <|endoftext|> too
}

// Bad model files are refused with the flag, the file and the rule, whatever the build.
TEST(SentencePieceTokenizer, MissingOrDirectoryModelNamesTheFlag) {
  TempDir dir;
  std::string msg = usage_message([&] { make_tokenizer(dir.file("none.model")); });
  EXPECT_NE(msg.find("--tokenizer-model " + dir.file("none.model") + ": cannot open: No such file or directory"),
            std::string::npos)
      << msg;
  msg = usage_message([&] { make_tokenizer(dir.file("")); });
  EXPECT_NE(msg.find("--tokenizer-model "), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

class SentencePieceModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::spm_unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
  TempDir dir_;
};

TEST_F(SentencePieceModel, VocabularyNameAndEodComeFromTheModel) {
  const auto tok = make_tokenizer(testing::train_spm_model(dir_, "gpl3", false));
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->name(), "SentencePiece (gpl3.model)");
  EXPECT_EQ(tok->eod_id(), 2);  // spm_train's default eos id (</s>)
  EXPECT_EQ(tok->bos_id(), 1);  // and bos (<s>): export-hf's bos_token_id
  EXPECT_TRUE(tok->encodes_lines());
}

// With LLaMA's settings (identity normalisation, whitespace kept, byte fallback) decoding gives
// back every line of the training text, and text the model never saw (UTF-8 through bytes).
TEST_F(SentencePieceModel, EncodingRoundTripsThroughDecode) {
  const auto tok = make_tokenizer(testing::train_spm_model(dir_, "llama_like", true));
  const auto lines = testing::file_lines(testing::kGpl3);
  ASSERT_GT(lines.size(), 600u);
  int64_t total = 0, bytes = 0;
  for (const std::string& line : lines) {
    std::vector<int32_t> ids;
    tok->encode(line, ids);
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 512) << id;
    ASSERT_EQ(tok->decode(ids), line);
    total += int64_t(ids.size());
    bytes += int64_t(line.size());
  }
  EXPECT_LT(total, bytes / 2) << "BPE should compress English text well below a token per byte";
  for (const std::string text : {"naïve café — 日本語 ✓", "  two  spaces and a\ttab  ", "x"}) {
    std::vector<int32_t> ids;
    tok->encode(text, ids);
    EXPECT_EQ(tok->decode(ids), text);
  }
}

// spm_train's defaults normalise (NFKC, extra whitespace removed): decode gives the normalised line.
TEST_F(SentencePieceModel, DefaultModelRoundTripsNormalisedText) {
  const auto tok = make_tokenizer(testing::train_spm_model(dir_, "gpl3", false));
  const std::string text = "This program is free software: you can redistribute it.";
  std::vector<int32_t> ids;
  tok->encode(text, ids);
  EXPECT_EQ(tok->decode(ids), text);
  ids.clear();
  tok->encode("  Everyone   is permitted  ", ids);
  EXPECT_EQ(tok->decode(ids), "Everyone is permitted");
}

TEST_F(SentencePieceModel, EncodingEqualsSpmEncode) {
  for (const bool llama_like : {false, true}) {
    const std::string model = testing::train_spm_model(dir_, llama_like ? "l" : "d", llama_like);
    const auto tok = make_tokenizer(model);
    std::vector<int32_t> ids;
    for (const std::string& line : testing::file_lines(testing::kGpl3)) tok->encode(line, ids);
    const std::vector<int32_t> want = testing::spm_encode_ids(dir_, model, testing::kGpl3);
    ASSERT_GT(want.size(), 1000u);
    EXPECT_EQ(ids, want) << "llama_like " << llama_like;
  }
}

TEST_F(SentencePieceModel, CorruptModelsAreRefusedWithTheRule) {
  const std::string model = testing::train_spm_model(dir_, "gpl3", false);
  const std::vector<uint8_t> good = testing::read_file(model);
  const std::string truncated = dir_.file("truncated.model");
  testing::write_file(truncated, std::vector<uint8_t>(good.begin(), good.begin() + long(good.size() / 2)));
  const std::string text = dir_.file("text.model");
  testing::write_file(text, testing::read_file(testing::kGpl3));
  for (const std::string& bad : {truncated, text}) {
    const std::string msg = usage_message([&] { make_tokenizer(bad); });
    EXPECT_NE(msg.find("--tokenizer-model " + bad + ": not a SentencePiece model"), std::string::npos) << msg;
  }
  // An empty file parses as an empty model, which lacks the pieces every model has.
  const std::string empty = dir_.file("empty.model");
  testing::write_file(empty, {});
  const std::string msg = usage_message([&] { make_tokenizer(empty); });
  EXPECT_NE(msg.find("--tokenizer-model " + empty + ": not a usable SentencePiece model"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ptdp
