// TensorBoard event files: CRC-32C, and the TFRecord framing and Event protobufs as written.
#include "core/results/tensorboard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

TEST(TensorBoard, Crc32cIsCastagnolis) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the check value of CRC-32C
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

// The records of an event file: each "length, masked CRC of the length, data, masked CRC of the data".
std::vector<std::string> records_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t at = 0;
  while (at < all.size()) {
    uint64_t n = 0;
    uint32_t len_crc = 0, data_crc = 0;
    EXPECT_LE(at + 12, all.size());
    std::memcpy(&n, all.data() + at, 8);
    std::memcpy(&len_crc, all.data() + at + 8, 4);
    EXPECT_EQ(len_crc, masked_crc32c(std::string_view(all.data() + at, 8)));
    const std::string data = all.substr(at + 12, n);
    std::memcpy(&data_crc, all.data() + at + 12 + n, 4);
    EXPECT_EQ(data_crc, masked_crc32c(data));
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

TEST(TensorBoard, EventsAreFramedRecordsNamingTheirVersionThenScalars) {
  testing::TempDir dir;
  const std::string tb = dir.file("tb/run");  // made, parents too
  TensorBoardWriter w(tb, "--tensorboard-dir");
  w.add_scalar("lm loss", 2.5, 7);
  w.flush();
  const std::string name = std::filesystem::path(w.path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const std::vector<std::string> r = records_of(w.path());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NE(r[0].find("brain.Event:2"), std::string::npos);
  // Event {wall_time (field 1, fixed64), step 7 (field 2 varint), summary (field 5)}: the value's
  // tag and its float.
  EXPECT_EQ(r[1][0], char(0x09));
  EXPECT_EQ(r[1].substr(9, 2), std::string("\x10\x07", 2));
  EXPECT_NE(r[1].find("lm loss"), std::string::npos);
  const float v = 2.5f;
  char bytes[5] = {0x15};
  std::memcpy(bytes + 1, &v, 4);
  EXPECT_NE(r[1].find(std::string(bytes, 5)), std::string::npos);
}

TEST(TensorBoard, AnUncreatableDirectoryIsAUsageErrorNamingTheFlag) {
  testing::TempDir dir;
  const std::string file = dir.file("plain");
  std::ofstream(file) << "x";
  try {
    TensorBoardWriter w(file + "/sub", "--tensorboard-dir");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--tensorboard-dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptdp
