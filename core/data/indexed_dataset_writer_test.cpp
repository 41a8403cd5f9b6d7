#include "core/data/indexed_dataset_writer.h"

#include <gtest/gtest.h>

#include "core/data/indexed_dataset.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

using testing::Bytes;
using testing::TempDir;
using testing::usage_message;

std::vector<int32_t> written_tokens(const IndexedDataset& ds) {
  std::vector<int32_t> out(ds.total_tokens());
  ds.read_tokens(0, ds.total_tokens(), out.data());
  return out;
}

TEST(IndexedDatasetWriter, RoundTripsEveryIntegerDtype) {
  for (TokenDType t : {TokenDType::U8, TokenDType::I8, TokenDType::I16, TokenDType::U16, TokenDType::I32,
                       TokenDType::I64}) {
    TempDir dir;
    const std::string prefix = dir.file("rt");
    const std::vector<int32_t> a{0, 1, 2, 100}, b{}, c{static_cast<int32_t>(token_dtype_max(t) > 1000 ? 1000 : 7)};
    {
      IndexedDatasetWriter w(prefix, t);
      w.add_document(a);
      w.add_document(b);
      w.add_document(c);
      w.finalize();
    }
    const auto ds = IndexedDataset::open(prefix);
    EXPECT_EQ(ds.dtype(), t) << token_dtype_name(t);
    EXPECT_EQ(ds.num_sequences(), 3);
    EXPECT_EQ(ds.num_documents(), 3);
    EXPECT_EQ(ds.sequence_length(1), 0);
    EXPECT_EQ(ds.document_index(3), 3);
    std::vector<int32_t> all = a;
    all.insert(all.end(), c.begin(), c.end());
    EXPECT_EQ(written_tokens(ds), all) << token_dtype_name(t);
  }
}

TEST(IndexedDatasetWriter, OutputIsByteForByteMegatronFormat) {
  TempDir dir;
  const std::string prefix = dir.file("pin");
  IndexedDatasetWriter w(prefix, TokenDType::U16);
  w.add_document(std::vector<int32_t>{10, 11, 12});
  w.add_document(std::vector<int32_t>{500});
  w.finalize();
  Bytes idx;
  idx.raw("MMIDIDX\0\0", 9).put<uint64_t>(1).put<uint8_t>(8).put<uint64_t>(2).put<uint64_t>(3);
  idx.put<int32_t>(3).put<int32_t>(1);        // sequence lengths
  idx.put<int64_t>(0).put<int64_t>(6);        // sequence pointers (bytes)
  idx.put<int64_t>(0).put<int64_t>(1).put<int64_t>(2);  // document indices
  Bytes bin;
  bin.put<uint16_t>(10).put<uint16_t>(11).put<uint16_t>(12).put<uint16_t>(500);
  EXPECT_EQ(testing::read_file(prefix + ".idx"), idx.data);
  EXPECT_EQ(testing::read_file(prefix + ".bin"), bin.data);
  EXPECT_EQ(w.bytes_written(), idx.data.size() + bin.data.size());
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"pin.bin", "pin.idx"}));  // no temporaries left
}

TEST(IndexedDatasetWriter, LeavesNoFilesWhenNotFinalized) {
  TempDir dir;
  {
    IndexedDatasetWriter w(dir.file("half"), TokenDType::U16);
    w.add_document(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(IndexedDatasetWriter, AbandonedWriteKeepsThePreviousDataset) {
  TempDir dir;
  const std::string prefix = dir.file("keep");
  {
    IndexedDatasetWriter w(prefix, TokenDType::U16);
    w.add_document(std::vector<int32_t>{1, 2});
    w.finalize();
  }
  {
    IndexedDatasetWriter w(prefix, TokenDType::U16);
    w.add_document(std::vector<int32_t>{9, 9, 9});
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"keep.bin", "keep.idx"}));
  EXPECT_EQ(written_tokens(IndexedDataset::open(prefix)), (std::vector<int32_t>{1, 2}));
}

TEST(IndexedDatasetWriter, TokenOutsideDtypeIsUsageError) {
  TempDir dir;
  IndexedDatasetWriter w(dir.file("x"), TokenDType::U16);
  auto msg = usage_message([&] { w.add_document(std::vector<int32_t>{1, 65536}); });
  EXPECT_NE(msg.find("x.bin: token 65536 (document 0, position 1) does not fit in uint16"), std::string::npos) << msg;
  msg = usage_message([&] { w.add_document(std::vector<int32_t>{-1}); });
  EXPECT_NE(msg.find("token -1"), std::string::npos) << msg;
  EXPECT_EQ(w.num_documents(), 0);
}

TEST(IndexedDatasetWriter, FloatDtypeIsUsageError) {
  TempDir dir;
  const auto msg = usage_message([&] { IndexedDatasetWriter w(dir.file("f"), TokenDType::F32); });
  EXPECT_NE(msg.find("token dtype float32 is not an integer type"), std::string::npos) << msg;
}

TEST(IndexedDatasetWriter, MissingDirectoryIsUsageError) {
  TempDir dir;
  const auto msg = usage_message([&] { IndexedDatasetWriter w(dir.file("nope/x"), TokenDType::U16); });
  EXPECT_NE(msg.find("nope/x.bin: cannot create: No such file or directory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ptdp
