// A mapped file truncated by another process: one line naming it and exit code 2, not SIGBUS.
#include "core/data/mapped_file.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

TEST(MappedFile, ATruncationWhileMappedEndsWithOneLineNotSigbus) {
  testing::TempDir dir;
  const std::string path = dir.file("tokens.bin");
  testing::write_file(path, std::vector<uint8_t>(1 << 20, 7));
  const std::string err = dir.file("stderr.txt");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = std::freopen(err.c_str(), "w", stderr);
    (void)f;
    MappedFile m = MappedFile::open(path);
    if (::truncate(path.c_str(), 0) != 0) _exit(3);
    volatile std::byte b = m.bytes()[512 * 1024];  // beyond the new end
    (void)b;
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(err);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "ptdp: error: " + path +
                      ": the file became shorter while it was being read (truncated or rewritten by another "
                      "process?)");
}

TEST(MappedFile, ReadingAnIntactMapIsUnaffected) {
  testing::TempDir dir;
  const std::string path = dir.file("tokens.bin");
  testing::write_file(path, std::vector<uint8_t>(4096, 9));
  MappedFile m = MappedFile::open(path);
  EXPECT_EQ(std::to_integer<int>(m.bytes()[4095]), 9);
  MappedFile moved = std::move(m);
  EXPECT_EQ(moved.size(), 4096u);
}

}  // namespace
}  // namespace ptdp
