#include "core/data/preprocess.h"

#include <gtest/gtest.h>

#include "core/data/indexed_dataset.h"
#include "core/data/testing/data_test_util.h"

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
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"in.txt", "out.bin", "out.idx"}));
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

}  // namespace
}  // namespace ptdp
