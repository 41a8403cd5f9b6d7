// The digest of a dataset's sequence lengths (the index cache's key) changes with the lengths only.
#include "core/data/dataset_digest.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/data/indexed_dataset_writer.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

void write_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& docs) {
  IndexedDatasetWriter w(prefix, TokenDType::U16);
  for (const auto& d : docs) w.add_document(d);
  w.finalize();
}

TEST(DatasetDigest, OnlyLengthsChangeTheLengthsDigest) {
  testing::TempDir dir;
  write_dataset(dir.file("a"), {{1, 2, 3}, {4, 5}});
  write_dataset(dir.file("token"), {{1, 2, 3}, {4, 6}});   // same size, one token other
  write_dataset(dir.file("lengths"), {{1, 2}, {3, 4, 5}});  // same tokens, other lengths
  const auto a = IndexedDataset::open(dir.file("a"));
  const auto token = IndexedDataset::open(dir.file("token")), lengths = IndexedDataset::open(dir.file("lengths"));
  EXPECT_EQ(sequence_lengths_digest(a), sequence_lengths_digest(token));
  EXPECT_NE(sequence_lengths_digest(a), sequence_lengths_digest(lengths));
}

}  // namespace
}  // namespace ptdp
