#include "core/data/preprocess.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "core/data/indexed_dataset.h"
#include "core/data/sentencepiece_tokenizer.h"
#include "core/common/utf8.h"
#include "core/data/gpt2_bpe_files.h"
#include "core/data/gpt2_bpe_tokenizer.h"
#include "core/data/testing/data_test_util.h"
#include "core/data/testing/gpt2_bpe_fixtures.h"
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
  opts.tokenizer.model = model_;
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
  opts.tokenizer.model = model_;
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
  opts.tokenizer.model = bad;
  const auto msg = usage_message([&] { preprocess_text(testing::kGpl3, dir_.file("out"), opts, nullptr); });
  EXPECT_NE(msg.find("--tokenizer-model " + bad + ": not a SentencePiece model"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.idx")));
}

TEST_F(PreprocessSentencePiece, BlankLinesAloneGiveNoTokenAndAreRefused) {
  testing::write_file(dir_.file("blank.txt"), {'\n', '\n'});
  PreprocessOptions opts;
  opts.tokenizer.model = model_;
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
    opts.tokenizer.model = model;
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
  opts.tokenizer.model = model_;
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

class PreprocessGpt2Bpe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::gpt2_unavailable(); !why.empty()) GTEST_SKIP() << why;
    fx_ = testing::read_gpt2_fixtures();
    opts_.tokenizer.type = "GPT2BPETokenizer";
    opts_.tokenizer.vocab_file = testing::gpt2_fixture("vocab.json");
    opts_.tokenizer.merge_file = testing::gpt2_fixture("merges.txt");
  }
  std::vector<int32_t> tokens_of(const std::string& prefix) {
    const auto ds = IndexedDataset::open(prefix);
    std::vector<int32_t> tokens(size_t(ds.total_tokens()));
    ds.read_tokens(0, ds.total_tokens(), tokens.data());
    return tokens;
  }
  std::string write(const std::string& name, const std::string& text) {
    testing::write_file(dir_.file(name), std::vector<uint8_t>(text.begin(), text.end()));
    return dir_.file(name);
  }
  TempDir dir_;
  testing::Gpt2Fixtures fx_;
  PreprocessOptions opts_;
};

// The dataset holds exactly transformers' ids of the whole file (line breaks are tokens), as one
// uint16 document (Megatron's dtype for 1800 ids).
TEST_F(PreprocessGpt2Bpe, TokensAreTransformersIdsOfTheWholeFile) {
  PreprocessStats stats;
  preprocess_text(testing::gpt2_fixture("text.txt"), dir_.file("out"), opts_, &stats);
  const auto ds = IndexedDataset::open(dir_.file("out"));
  EXPECT_EQ(ds.dtype(), TokenDType::U16);
  EXPECT_EQ(ds.num_documents(), 1);
  EXPECT_EQ(tokens_of(dir_.file("out")), fx_.document_ids);
  EXPECT_EQ(stats.tokenizer, "GPT-2 BPE (vocab.json, merges.txt)");
  EXPECT_EQ(stats.vocab_size, 1800);
  EXPECT_EQ(stats.dtype, "uint16");
  EXPECT_EQ(stats.inexact_cuts, 0);
}

TEST_F(PreprocessGpt2Bpe, AppendEodEndsTheDocumentWithEndOfText) {
  opts_.append_eod = true;
  preprocess_text(testing::gpt2_fixture("text.txt"), dir_.file("out"), opts_, nullptr);
  std::vector<int32_t> want = fx_.document_ids;
  want.push_back(1799);
  EXPECT_EQ(tokens_of(dir_.file("out")), want);
}

// Read in blocks and encoded a head at a time (windows from 48 bytes, whose blocks cut through
// multi-byte characters and runs of spaces, and whose 8 x 48 bytes still hold the document's
// 300-letter run, to 4 KiB on a 100 KiB text): the whole file's ids, transformers' for the
// fixture document, with no inexact cut.
TEST_F(PreprocessGpt2Bpe, AFileLargerThanTheEncodeWindowGivesTheWholeFilesIds) {
  for (const size_t window : {48, 67, 1000}) {
    opts_.max_encode_piece = window;
    PreprocessStats stats;
    preprocess_text(testing::gpt2_fixture("text.txt"), dir_.file("out"), opts_, &stats);
    EXPECT_EQ(tokens_of(dir_.file("out")), fx_.document_ids) << window;
    EXPECT_EQ(stats.inexact_cuts, 0) << window;
  }
  std::string text = testing::file_bytes(testing::gpt2_fixture("text.txt"));
  while (text.size() < (100 << 10)) text += text + "\n   \n\t" + std::string(3000, ' ') + "x";
  const std::string path = write("big.txt", text);
  const Gpt2BpeTokenizer tok(opts_.tokenizer.vocab_file, opts_.tokenizer.merge_file);
  std::vector<int32_t> whole;
  tok.encode(text, whole);
  opts_.max_encode_piece = 4096;
  PreprocessStats stats;
  preprocess_text(path, dir_.file("big"), opts_, &stats);
  EXPECT_EQ(tokens_of(dir_.file("big")), whole);
  EXPECT_EQ(stats.inexact_cuts, 0);
}

// Latin-1 and other bytes that are not UTF-8: refused naming the byte offset and line, or with
// allow_invalid_utf8 encoded as U+FFFD (transformers' ids of Python's errors='replace' text) and
// counted, also when a block ends inside an ill-formed sequence.
TEST_F(PreprocessGpt2Bpe, TextThatIsNotUtf8IsRefusedUnlessAllowedThenReplaced) {
  const testing::Gpt2Case& c = fx_.at("invalid_utf8");
  const std::string path = write("bad.txt", c.text);
  const auto msg = usage_message([&] { preprocess_text(path, dir_.file("out"), opts_, nullptr); });
  EXPECT_NE(msg.find("--input " + path + ": not UTF-8 at byte offset 3 (line 1: byte 0xe9; Latin-1 text?)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--allow-invalid-utf8"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
  const std::string later = write("later.txt", "fine\nstill fine\nna\xefve\n");
  const auto msg2 = usage_message([&] { preprocess_text(later, dir_.file("out"), opts_, nullptr); });
  EXPECT_NE(msg2.find("not UTF-8 at byte offset 18 (line 3: byte 0xef"), std::string::npos) << msg2;

  opts_.allow_invalid_utf8 = true;
  for (const size_t window : {16, 1 << 20}) {
    opts_.max_encode_piece = window;
    PreprocessStats stats;
    preprocess_text(path, dir_.file("out"), opts_, &stats);
    EXPECT_EQ(tokens_of(dir_.file("out")), c.ids) << window;
    EXPECT_EQ(stats.invalid_utf8_lines, 1);
    EXPECT_EQ(stats.invalid_utf8_bytes, 15);  // e9, ef, ff, fe, c3, e2 82, ed a0 80, f0 9f 98, c0 af
  }
  const std::string cut = write("cut.txt", "ok \xf0\x9f\x98");  // ends inside a sequence
  PreprocessStats stats;
  preprocess_text(cut, dir_.file("cut"), opts_, &stats);
  EXPECT_EQ(stats.invalid_utf8_bytes, 3);
  const Gpt2BpeTokenizer tok(opts_.tokenizer.vocab_file, opts_.tokenizer.merge_file);
  EXPECT_EQ(tok.decode(tokens_of(dir_.file("cut"))), "ok " + std::string(kUtf8Replacement));
}

// One run of letters longer than 8 windows has no place where the pre-tokenizer is sure to cut:
// it is cut anyway, counted, and decodes to the same text.
TEST_F(PreprocessGpt2Bpe, ARunLongerThanEightWindowsIsCutAndCounted) {
  const std::string text = "start " + std::string(3000, 'a') + " end\n";
  const std::string path = write("run.txt", text);
  opts_.max_encode_piece = 64;
  PreprocessStats stats;
  preprocess_text(path, dir_.file("out"), opts_, &stats);
  EXPECT_GE(stats.inexact_cuts, 1);
  const Gpt2BpeTokenizer tok(opts_.tokenizer.vocab_file, opts_.tokenizer.merge_file);
  EXPECT_EQ(tok.decode(tokens_of(dir_.file("out"))), text);
}

// Megatron's dtype: uint16 for vocabularies under 65500 ids, int32 from there on.
TEST_F(PreprocessGpt2Bpe, AVocabularyOf65500IdsTakesInt32Tokens) {
  for (const int64_t n : {65499, 65500}) {
    nlohmann::json v = nlohmann::json::object();
    for (const std::string& s : gpt2_byte_symbols()) {
      const size_t id = v.size();
      v[s] = id;
    }
    while (int64_t(v.size()) < n) {
      const size_t id = v.size();
      v["tok" + std::to_string(id)] = id;
    }
    opts_.tokenizer.vocab_file = write("vocab.json", v.dump());
    opts_.tokenizer.merge_file = write("merges.txt", "#version: 0.2\n");
    PreprocessStats stats;
    preprocess_text(testing::gpt2_fixture("text.txt"), dir_.file("out"), opts_, &stats);
    EXPECT_EQ(stats.vocab_size, n);
    EXPECT_EQ(IndexedDataset::open(dir_.file("out")).dtype(), n < 65500 ? TokenDType::U16 : TokenDType::I32);
    EXPECT_EQ(stats.dtype, n < 65500 ? "uint16" : "int32");
  }
}

TEST_F(PreprocessGpt2Bpe, AVocabularyWithoutEndOfTextRefusesAppendEodWithNoOutput) {
  nlohmann::json v = nlohmann::json::parse(testing::file_bytes(opts_.tokenizer.vocab_file));
  ASSERT_EQ(v.erase("<|endoftext|>"), 1u);  // the last id: the others still run 0..N-1
  opts_.tokenizer.vocab_file = write("vocab.json", v.dump());
  opts_.append_eod = true;
  const auto msg =
      usage_message([&] { preprocess_text(testing::gpt2_fixture("text.txt"), dir_.file("out"), opts_, nullptr); });
  EXPECT_NE(msg.find("--append-eod: --vocab-file " + opts_.tokenizer.vocab_file + " has no <|endoftext|> token"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.bin")));
}

}  // namespace
}  // namespace ptdp
