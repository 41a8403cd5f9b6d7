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

std::vector<int32_t> all_tokens(const IndexedDataset& ds) {
  std::vector<int32_t> out(ds.total_tokens());
  ds.read_tokens(0, ds.total_tokens(), out.data());
  return out;
}

TEST(IndexedDatasetFormat, ReadsAHandBuiltMegatronImage) {
  TempDir dir;
  const auto ds = IndexedDataset::open(Image{}.write(dir));
  EXPECT_EQ(ds.dtype(), TokenDType::U16);
  EXPECT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 2);
  EXPECT_EQ(ds.sequence_length(0), 3);
  EXPECT_EQ(ds.sequence_length(1), 1);
  EXPECT_EQ(ds.sequence_length(2), 2);
  EXPECT_EQ(ds.sequence_offset(2), 4);
  EXPECT_EQ(ds.document_index(0), 0);
  EXPECT_EQ(ds.document_index(1), 2);
  EXPECT_EQ(ds.document_index(2), 3);
  EXPECT_EQ(ds.total_tokens(), 6);
  EXPECT_EQ(all_tokens(ds), (std::vector<int32_t>{10, 11, 12, 500, 65535, 0}));
}

TEST(IndexedDatasetFormat, HeaderIs34BytesWithCountsAtOffsets18And26) {
  const auto idx = Image{}.idx();
  EXPECT_EQ(kMegatronIndexHeaderBytes, 34u);
  ASSERT_EQ(idx.size(), 34u + 3 * 4 + 3 * 8 + 3 * 8);
  EXPECT_EQ(idx[17], 8);  // dtype code
  EXPECT_EQ(idx[18], 3);  // sequence count, little-endian
  EXPECT_EQ(idx[26], 3);  // document count (documents + 1)
}

TEST(IndexedDatasetFormat, ReadTokensSpansSequenceBoundaries) {
  TempDir dir;
  const auto ds = IndexedDataset::open(Image{}.write(dir));
  std::vector<int32_t> out(3);
  ds.read_tokens(2, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{12, 500, 65535}));
  EXPECT_THROW(ds.read_tokens(4, 3, out.data()), RuntimeError);
}

TEST(IndexedDatasetFormat, AcceptsTrailingMultimodalSequenceModes) {
  TempDir dir;
  Image img;
  const std::string prefix = img.write(dir);
  auto idx = img.idx();
  idx.insert(idx.end(), {0, 1, 0});  // int8 sequence_modes[3]
  testing::write_file(prefix + ".idx", idx);
  EXPECT_EQ(IndexedDataset::open(prefix).total_tokens(), 6);
}

TEST(IndexedDatasetFormat, EmptyDatasetOpens) {
  TempDir dir;
  Image img;
  img.lengths = {};
  img.pointers = {};
  img.docs = {0};
  img.tokens = {};
  const auto ds = IndexedDataset::open(img.write(dir));
  EXPECT_EQ(ds.num_sequences(), 0);
  EXPECT_EQ(ds.num_documents(), 0);
  EXPECT_EQ(ds.total_tokens(), 0);
}

TEST(IndexedDatasetFormat, MovedDatasetStillReads) {
  TempDir dir;
  auto a = IndexedDataset::open(Image{}.write(dir));
  IndexedDataset b = std::move(a);
  EXPECT_EQ(all_tokens(b)[3], 500);
}

}  // namespace
}  // namespace ptdp
