#include "core/data/npy_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/common/error.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;

std::string usage_message_of(const std::string& path) {
  try {
    NpyArray::open(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "opened";
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(NpyFile, WritesWhatItReadsBackWithNumpysHeader) {
  TempDir dir;
  NpyWriter w(dir.file("a.npy"), NpyType::I64, {3, 2});
  for (int i = 0; i < 6; ++i) w.data<int64_t>()[i] = i - 2;
  w.finish();
  const auto a = NpyArray::open(dir.file("a.npy"));
  EXPECT_EQ(a.type(), NpyType::I64);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.at(i), i - 2);
  // numpy.save pads the header to 64 bytes, leaving room for 21 digits in the first axis.
  const std::string h = npy_header(NpyType::U32, {5});
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(10, 60), "{'descr': '<u4', 'fortran_order': False, 'shape': (5,), }   ");
  EXPECT_EQ(h.back(), '\n');
}

TEST(NpyFile, AnUnfinishedWriterLeavesNothingBehind) {
  TempDir dir;
  { NpyWriter w(dir.file("b.npy"), NpyType::I32, {10}); }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(NpyFile, MalformedFilesAreUsageErrorsNamingTheFile) {
  TempDir dir;
  const std::string p = dir.file("bad.npy");
  write_file(p, "not numpy at all");
  EXPECT_NE(usage_message_of(p).find(p + ": not a NumPy .npy file"), std::string::npos);
  std::string h = npy_header(NpyType::I32, {4});
  write_file(p, h + std::string(12, '\0'));  // 3 items where the header says 4
  EXPECT_NE(usage_message_of(p).find("but its header says"), std::string::npos) << usage_message_of(p);
  std::string f = npy_header(NpyType::I32, {4});
  f.replace(f.find("<i4"), 3, "<f4");
  write_file(p, f + std::string(16, '\0'));
  EXPECT_NE(usage_message_of(p).find("item type <f4"), std::string::npos) << usage_message_of(p);
  std::string t = npy_header(NpyType::I32, {4});
  t.replace(t.find("(4,)"), 4, "(4, 2, 1)");
  write_file(p, t);
  EXPECT_NE(usage_message_of(p).find("unsupported .npy header"), std::string::npos) << usage_message_of(p);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"(4,)", "(4)"}, {"(4,)", "(,)"}, {"(4,)", "(4,2)"}, {"(4,)", "(-4,)"}, {"False", "Maybe"},
           {"'<i4'", "'<i4x'"}, {", }", ", 'x': 1, }"}, {"{'descr'", "{ 'descr'"}}) {
    std::string u = npy_header(NpyType::I32, {4});
    u.replace(u.find(from), from.size(), to);
    write_file(p, u + std::string(16, '\0'));
    EXPECT_NE(usage_message_of(p).find("unsupported .npy header"), std::string::npos) << to << ": " << usage_message_of(p);
  }
}

}  // namespace
}  // namespace ptdp
