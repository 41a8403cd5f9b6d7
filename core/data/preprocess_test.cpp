#include "core/data/preprocess.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/data/indexed_dataset.h"
#include "core/data/sentencepiece_tokenizer.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/spm_tokenizer_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;
using testing::usage_message;

TEST(Preprocess, TokensAreTheBytesOfTheFile) {
  TempDir dir;
  const std::vector<uint8_t> text{'h', 'i', '\n', 0, 255, 0xC3, 0xA9, '!'};
  testing::write_file(dir.file("in.txt"), text);
  PreprocessStats stats;
  preprocess_text(dir.file("in.txt"), dir.file("out"), &stats);
  const auto ds = IndexedDataset::open(dir.file("out"));
  EXPECT_EQ(ds.dtype(), TokenDType::U16);
  EXPECT_EQ(ds.num_documents(), 1);
  EXPECT_EQ(ds.num_sequences(), 1);
  std::vector<int32_t> tokens(ds.total_tokens());
  ds.read_tokens(0, ds.total_tokens(), tokens.data());
  EXPECT_EQ(tokens, std::vector<int32_t>(text.begin(), text.end()));
  EXPECT_NO_THROW(check_vocab(ds, kByteVocabSize));
  EXPECT_EQ(stats.documents, 1);
  EXPECT_EQ(stats.tokens, 8);
  EXPECT_EQ(stats.bytes_written, 8u * 2 + 34 + 12 + 16);
  EXPECT_EQ(stats.tokenizer, "byte-level");
  EXPECT_EQ(stats.vocab_size, 256);
  EXPECT_EQ(stats.dtype, "uint16");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"in.txt", "out.bin", "out.idx"}));
}

// The byte-level files are the same bit for bit as before tokenizers were pluggable: the
// MMIDIDX header, one sequence of 5 tokens, uint16 little-endian bytes.
TEST(Preprocess, ByteLevelFilesAreUnchangedBitForBit) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'a', 'b', '\n', 0xFF, 'c'});
  preprocess_text(dir.file("in.txt"), dir.file("out"), PreprocessOptions{}, nullptr);
  const std::vector<uint8_t> bin = testing::read_file(dir.file("out.bin"));
  EXPECT_EQ(bin, (std::vector<uint8_t>{'a', 0, 'b', 0, '\n', 0, 0xFF, 0, 'c', 0}));
  testing::Bytes idx;
  idx.raw("MMIDIDX\x00\x00", 9).put<uint64_t>(1).put<uint8_t>(8);  // version 1, uint16
  idx.put<uint64_t>(1).put<uint64_t>(2);                            // 1 sequence, 2 document indices
  idx.put<int32_t>(5).put<int64_t>(0).put<int64_t>(0).put<int64_t>(1);
  EXPECT_EQ(testing::read_file(dir.file("out.idx")), idx.data);
}

TEST(Preprocess, AppendEodWithTheByteTokenizerIsRefused) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'a', 'b'});
  PreprocessOptions opts;
  opts.append_eod = true;
  const auto msg = usage_message([&] { preprocess_text(dir.file("in.txt"), dir.file("out"), opts, nullptr); });
  EXPECT_NE(msg.find("--append-eod: the byte-level tokenizer has no end-of-document id"), std::string::npos) << msg;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"in.txt"});
}

// Inputs are streamed in 1 MiB pieces: a file of several pieces is still one document, byte for
// byte.
TEST(Preprocess, AnInputOfSeveralPiecesIsOneDocumentByteForByte) {
  TempDir dir;
  std::vector<uint8_t> text((5u << 19) + 123);  // 2.5 MiB and a bit
  for (size_t i = 0; i < text.size(); ++i) text[i] = uint8_t((i * 2654435761u) >> 13);
  testing::write_file(dir.file("in.txt"), text);
  PreprocessStats stats;
  preprocess_text(dir.file("in.txt"), dir.file("out"), &stats);
  const auto ds = IndexedDataset::open(dir.file("out"));
  EXPECT_EQ(ds.num_documents(), 1);
  EXPECT_EQ(ds.num_sequences(), 1);
  ASSERT_EQ(ds.total_tokens(), int64_t(text.size()));
  std::vector<int32_t> tokens(ds.total_tokens());
  ds.read_tokens(0, ds.total_tokens(), tokens.data());
  EXPECT_EQ(tokens, std::vector<int32_t>(text.begin(), text.end()));
  EXPECT_EQ(stats.tokens, int64_t(text.size()));
}

TEST(Preprocess, MissingInputNamesTheFlag) {
  TempDir dir;
  const auto msg = usage_message([&] { preprocess_text(dir.file("none.txt"), dir.file("out"), nullptr); });
  EXPECT_NE(msg.find("--input "), std::string::npos) << msg;
  EXPECT_NE(msg.find("none.txt: cannot open: No such file or directory"), std::string::npos) << msg;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{});
}

TEST(Preprocess, EmptyInputIsRejected) {
  TempDir dir;
  testing::write_file(dir.file("empty.txt"), {});
  const auto msg = usage_message([&] { preprocess_text(dir.file("empty.txt"), dir.file("out"), nullptr); });
  EXPECT_NE(msg.find("--input "), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty.txt: file is empty"), std::string::npos) << msg;
}

TEST(Preprocess, DirectoryInputIsRejected) {
  TempDir dir;
  const auto msg = usage_message([&] { preprocess_text(dir.file(""), dir.file("out"), nullptr); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(Preprocess, MissingOutputDirectoryNamesTheFlag) {
  TempDir dir;
  testing::write_file(dir.file("in.txt"), {'a', 'b'});
  const auto msg = usage_message([&] { preprocess_text(dir.file("in.txt"), dir.file("no/out"), nullptr); });
  EXPECT_NE(msg.find("--output-prefix "), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

class PreprocessSentencePiece : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::spm_unavailable(); !why.empty()) GTEST_SKIP() << why;
    model_ = testing::train_spm_model(dir_, "gpl3", false);
  }
  std::vector<int32_t> tokens_of(const std::string& prefix) {
    const auto ds = IndexedDataset::open(prefix);
    std::vector<int32_t> tokens(size_t(ds.total_tokens()));
    ds.read_tokens(0, ds.total_tokens(), tokens.data());
    return tokens;
  }
  TempDir dir_;
  std::string model_;
};

// The dataset holds exactly spm_encode's ids of the file's lines, as one uint16 document.
TEST_F(PreprocessSentencePiece, TokensAreSpmEncodeIds) {
  PreprocessOptions opts;
  opts.tokenizer_model = model_;
  PreprocessStats stats;
  preprocess_text(testing::kGpl3, dir_.file("out"), opts, &stats);
  const std::vector<int32_t> want = testing::spm_encode_ids(dir_, model_, testing::kGpl3);
  ASSERT_GT(want.size(), 1000u);
  const auto ds = IndexedDataset::open(dir_.file("out"));
  EXPECT_EQ(ds.dtype(), TokenDType::U16);
  EXPECT_EQ(ds.num_documents(), 1);
  EXPECT_EQ(tokens_of(dir_.file("out")), want);
  EXPECT_EQ(stats.tokens, int64_t(want.size()));
  EXPECT_EQ(stats.tokenizer, "SentencePiece (gpl3.model)");
  EXPECT_EQ(stats.vocab_size, 512);
  EXPECT_EQ(stats.dtype, "uint16");
  EXPECT_NO_THROW(check_vocab(ds, 512));
  // Ids above 255 are there: a byte-level vocabulary does not cover this dataset.
  EXPECT_THROW(check_vocab(ds, 256), UsageError);
}

TEST_F(PreprocessSentencePiece, AppendEodEndsTheDocumentWithEos) {
  PreprocessOptions opts;
  opts.tokenizer_model = model_;
  opts.append_eod = true;
  preprocess_text(testing::kGpl3, dir_.file("out"), opts, nullptr);
  std::vector<int32_t> want = testing::spm_encode_ids(dir_, model_, testing::kGpl3);
  want.push_back(2);  // </s>
  EXPECT_EQ(tokens_of(dir_.file("out")), want);
}

TEST_F(PreprocessSentencePiece, CorruptModelLeavesNoOutput) {
  const std::vector<uint8_t> good = testing::read_file(model_);
  const std::string bad = dir_.file("bad.model");
  testing::write_file(bad, std::vector<uint8_t>(good.begin(), good.begin() + 100));
  PreprocessOptions opts;
  opts.tokenizer_model = bad;
  const auto msg = usage_message([&] { preprocess_text(testing::kGpl3, dir_.file("out"), opts, nullptr); });
  EXPECT_NE(msg.find("--tokenizer-model " + bad + ": not a SentencePiece model"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.idx")));
}

TEST_F(PreprocessSentencePiece, BlankLinesAloneGiveNoTokenAndAreRefused) {
  testing::write_file(dir_.file("blank.txt"), {'\n', '\n'});
  PreprocessOptions opts;
  opts.tokenizer_model = model_;
  const auto msg = usage_message([&] { preprocess_text(dir_.file("blank.txt"), dir_.file("out"), opts, nullptr); });
  EXPECT_NE(msg.find("--input " + dir_.file("blank.txt") + ": SentencePiece (gpl3.model) gives no token"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
}

// A line longer than the encode window (GPL-3's words joined by spaces, no line break; a 64 KiB
// window here, 1 MiB in use) is encoded in pieces cut at spaces, so memory stays bounded (a 50 MB
// line took 3.9 GB and ended in bad_alloc; now about 195 MB resident), with exactly spm_encode's
// ids of the whole line, for spm_train's default normalisation and for LLaMA's settings
// (whitespace kept, byte fallback).
TEST_F(PreprocessSentencePiece, ALineLongerThanTheEncodeWindowGivesTheWholeLinesIds) {
  std::string words, word;
  std::ifstream gpl(testing::kGpl3);
  for (int copy = 0; copy < 6; ++copy) {
    gpl.clear();
    gpl.seekg(0);
    while (gpl >> word) words.append(words.empty() ? "" : " ").append(word);
  }
  constexpr size_t kWindow = 64 << 10;
  ASSERT_GT(words.size(), 2 * kWindow);
  testing::write_file(dir_.file("long.txt"), std::vector<uint8_t>(words.begin(), words.end()));
  for (const bool llama_like : {false, true}) {
    const std::string model = llama_like ? testing::train_spm_model(dir_, "llama", true) : model_;
    PreprocessOptions opts;
    opts.tokenizer_model = model;
    opts.max_encode_piece = kWindow;
    PreprocessStats stats;
    preprocess_text(dir_.file("long.txt"), dir_.file("long"), opts, &stats);
    EXPECT_EQ(stats.long_lines, 1);
    EXPECT_EQ(stats.inexact_cuts, 0);
    EXPECT_EQ(tokens_of(dir_.file("long")), testing::spm_encode_ids(dir_, model, dir_.file("long.txt")))
        << "llama_like " << llama_like;
  }
}

// Latin-1 text: SentencePiece turned 24% of a file's tokens into <unk> without a word. Refused,
// naming the line and the byte; with allow_invalid_utf8 encoded and counted.
TEST_F(PreprocessSentencePiece, TextThatIsNotUtf8IsRefusedUnlessAllowedAndThenCounted) {
  const std::string text = "caf\xc3\xa9 is UTF-8\nbut caf\xe9 and na\xefve are Latin-1\nfine\n";
  testing::write_file(dir_.file("latin1.txt"), std::vector<uint8_t>(text.begin(), text.end()));
  PreprocessOptions opts;
  opts.tokenizer_model = model_;
  const auto msg = usage_message([&] { preprocess_text(dir_.file("latin1.txt"), dir_.file("out"), opts, nullptr); });
  EXPECT_NE(msg.find("line 2 is not UTF-8 (byte 0xe9 at byte 8 of the line; Latin-1 text?)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--allow-invalid-utf8"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
  opts.allow_invalid_utf8 = true;
  PreprocessStats stats;
  preprocess_text(dir_.file("latin1.txt"), dir_.file("out"), opts, &stats);
  EXPECT_EQ(stats.invalid_utf8_lines, 1);
  EXPECT_EQ(stats.invalid_utf8_bytes, 2);
}

}  // namespace
}  // namespace ptdp
