// The digests of a dataset: its content (what the ranks of a job compare) changes with any token,
// at the same size; the sequence lengths' (the index cache's key) only with the lengths.
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

TEST(DatasetDigest, AnyTokenChangesTheContentDigestOnlyLengthsChangeTheLengthsDigest) {
  testing::TempDir dir;
  write_dataset(dir.file("a"), {{1, 2, 3}, {4, 5}});
  write_dataset(dir.file("copy"), {{1, 2, 3}, {4, 5}});
  write_dataset(dir.file("token"), {{1, 2, 3}, {4, 6}});    // same size, one token other
  write_dataset(dir.file("lengths"), {{1, 2}, {3, 4, 5}});  // same tokens, other lengths
  const auto a = IndexedDataset::open(dir.file("a")), copy = IndexedDataset::open(dir.file("copy"));
  const auto token = IndexedDataset::open(dir.file("token")), lengths = IndexedDataset::open(dir.file("lengths"));
  EXPECT_EQ(dataset_content_digest(a).size(), 64u);
  EXPECT_EQ(dataset_content_digest(a), dataset_content_digest(copy));
  EXPECT_NE(dataset_content_digest(a), dataset_content_digest(token));
  EXPECT_NE(dataset_content_digest(a), dataset_content_digest(lengths));
  EXPECT_EQ(sequence_lengths_digest(a), sequence_lengths_digest(token));
  EXPECT_NE(sequence_lengths_digest(a), sequence_lengths_digest(lengths));
}

}  // namespace
}  // namespace ptdp
