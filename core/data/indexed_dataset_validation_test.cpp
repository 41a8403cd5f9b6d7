#include "core/data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/data/testing/data_test_util.h"
#include "core/data/testing/megatron_image.h"

namespace ptdp {
namespace {

using testing::Bytes;
using testing::TempDir;
using testing::usage_message;
using testing::Image;

// Corrupt inputs: each is one UsageError naming the file and the rule it broke.

std::string open_error(const Image& img) {
  TempDir dir;
  const std::string prefix = img.write(dir);
  return usage_message([&] { IndexedDataset::open(prefix); });
}

TEST(IndexedDatasetCorrupt, WrongMagicIsRejected) {
  Image img;
  img.magic = std::string("TNTIDX\0\0\0", 9);
  const auto msg = open_error(img);
  EXPECT_NE(msg.find("ds.idx: bad magic (not a Megatron MMIDIDX index)"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, UnsupportedVersionIsRejected) {
  Image img;
  img.version = 2;
  const auto msg = open_error(img);
  EXPECT_NE(msg.find("ds.idx: version 2 is not supported (expected 1)"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, FloatDtypesAreNotTokenTypes) {
  for (uint8_t code : {6, 7}) {
    Image img;
    img.code = code;
    const auto msg = open_error(img);
    EXPECT_NE(msg.find(fmt::format("ds.idx: dtype code {} ({}) is not an integer token type", code,
                                   code == 6 ? "float64" : "float32")),
              std::string::npos)
        << msg;
  }
}

TEST(IndexedDatasetCorrupt, UnknownDtypeCodesAreRejected) {
  for (uint8_t code : {0, 9, 255}) {
    Image img;
    img.code = code;
    const auto msg = open_error(img);
    EXPECT_NE(msg.find(fmt::format("ds.idx: unknown dtype code {}", code)), std::string::npos) << msg;
  }
}

TEST(IndexedDatasetCorrupt, IndexTruncatedAtEveryCutPointIsRejected) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  const auto full = img.idx();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    testing::write_file(prefix + ".idx", std::vector<uint8_t>(full.begin(), full.begin() + cut));
    const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
    EXPECT_NE(msg.find("ds.idx: "), std::string::npos) << "cut " << cut << ": " << msg;
    const std::string rule = cut == 0 ? "bad magic" : "truncated";
    EXPECT_NE(msg.find(rule), std::string::npos) << "cut " << cut << ": " << msg;
  }
}

TEST(IndexedDatasetCorrupt, TruncatedIndexReportsNeededBytes) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto idx = img.idx();
  idx.resize(idx.size() - 1);
  testing::write_file(prefix + ".idx", idx);
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("truncated: header says 3 sequences and 3 documents but the file has 93 bytes (needs 94)"),
            std::string::npos)
      << msg;
}

TEST(IndexedDatasetCorrupt, HugeCountsDoNotOverflow) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto idx = img.idx();
  const uint64_t huge = std::numeric_limits<uint64_t>::max() / 4;
  std::memcpy(idx.data() + 18, &huge, 8);
  testing::write_file(prefix + ".idx", idx);
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.idx: truncated"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, TrailingGarbageInIndexIsRejected) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto idx = img.idx();
  idx.push_back(0);
  testing::write_file(prefix + ".idx", idx);
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.idx: has 95 bytes, expected 94"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, TruncatedBinIsRejected) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto bin = img.bin();
  bin.resize(11);
  testing::write_file(prefix + ".bin", bin);
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.bin: truncated: index needs 12 bytes, file has 11"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, BinLongerThanIndexIsRejected) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto bin = img.bin();
  bin.resize(14);
  testing::write_file(prefix + ".bin", bin);
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.bin: has 14 bytes but the index describes 12"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, MissingIndexIsRejected) {
  TempDir dir;
  const std::string prefix = Image{}.write(dir);
  std::filesystem::remove(prefix + ".idx");
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.idx: cannot open: No such file or directory"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, MissingBinIsRejected) {
  TempDir dir;
  const std::string prefix = Image{}.write(dir);
  std::filesystem::remove(prefix + ".bin");
  const auto msg = usage_message([&] { IndexedDataset::open(prefix); });
  EXPECT_NE(msg.find("ds.bin: cannot open: No such file or directory"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, PointerMismatchIsRejected) {
  Image img;
  img.pointers = {0, 6, 10};
  const auto msg = open_error(img);
  EXPECT_NE(msg.find("ds.idx: sequence pointers are not consecutive (sequence 2 points at byte 10, expected 8)"),
            std::string::npos)
      << msg;
}

TEST(IndexedDatasetCorrupt, NegativeSequenceLengthIsRejected) {
  Image img;
  img.lengths = {3, -1, 2};
  const auto msg = open_error(img);
  EXPECT_NE(msg.find("ds.idx: sequence 1 has negative length -1"), std::string::npos) << msg;
}

TEST(IndexedDatasetCorrupt, DocumentIndicesMustStartAtZeroIncreaseAndEndAtSequenceCount) {
  Image a;
  a.docs = {1, 2, 3};
  EXPECT_NE(open_error(a).find("ds.idx: document indices must start with 0"), std::string::npos);
  Image b;
  b.docs = {0, 2, 1, 3};
  EXPECT_NE(open_error(b).find("ds.idx: document indices are not increasing"), std::string::npos);
  Image c;
  c.docs = {0, 2};
  EXPECT_NE(open_error(c).find("ds.idx: last document index is 2 but the sequence count is 3"), std::string::npos);
  Image d;
  d.docs = {};
  EXPECT_NE(open_error(d).find("ds.idx: document indices are empty"), std::string::npos);
}

TEST(IndexedDatasetCorrupt, Int64TokenOutsideInt32IsRejectedOnRead) {
  TempDir dir;
  Image img;
  img.code = 5;  // int64
  img.lengths = {1};
  img.pointers = {0};
  img.docs = {0, 1};
  img.tokens = {};
  const std::string prefix = img.write(dir);
  testing::write_file(prefix + ".bin", Bytes{}.put<int64_t>(int64_t{1} << 40).data);
  const auto ds = IndexedDataset::open(prefix);
  int32_t out = 0;
  const auto msg = usage_message([&] { ds.read_tokens(0, 1, &out); });
  EXPECT_NE(msg.find("ds.bin: token 1099511627776 at position 0 does not fit in 32 bits"), std::string::npos)
      << msg;
}

// ---- vocabulary check ----

TEST(IndexedDatasetVocab, TokenOutsideVocabularyIsReported) {
  TempDir dir;
  const auto ds = IndexedDataset::open(Image{}.write(dir));
  const auto msg = usage_message([&] { check_vocab(ds, 256, "--vocab-size"); });
  EXPECT_NE(msg.find("ds.bin: token 500 at position 3 is outside the vocabulary (--vocab-size 256)"),
            std::string::npos)
      << msg;
  EXPECT_NO_THROW(check_vocab(ds, 65536));
  EXPECT_THROW(check_vocab(ds, 65535), UsageError);
}

TEST(IndexedDatasetVocab, NegativeTokenIsReported) {
  TempDir dir;
  Image img;
  img.code = 3;  // int16
  img.tokens = {1, 2, 3, static_cast<uint16_t>(int16_t{-7}), 4, 5};
  const auto ds = IndexedDataset::open(img.write(dir));
  const auto msg = usage_message([&] { check_vocab(ds, 100); });
  EXPECT_NE(msg.find("token -7 at position 3 is outside the vocabulary (--vocab-size 100)"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace ptdp
