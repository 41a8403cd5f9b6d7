// ptdp's own files written atomically (temporaries of dead writers removed, those being written
// kept) and one writer per output directory.
#include "core/results/output_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/common/error.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;

// A save killed before its rename leaves ".NAME.tmpXXXXXX" behind; the next write of NAME
// removes it, and nothing else.
TEST(AtomicWrite, AWriteRemovesTheTemporariesEarlierWritesOfItsTargetLeft) {
  TempDir dir;
  const std::string target = dir.file("shard.bin");
  for (const char* n : {".shard.bin.tmpAb12Cd", ".other.bin.tmpAb12Cd", "shard.bin.tmpAb12Cd", ".shard.bin.tmpX"})
    std::ofstream(dir.file(n)) << "x";
  write_file_atomic(target, "new");
  EXPECT_EQ(testing::read_text(target), "new");
  EXPECT_FALSE(std::filesystem::exists(dir.file(".shard.bin.tmpAb12Cd")));
  for (const char* n : {".other.bin.tmpAb12Cd", "shard.bin.tmpAb12Cd", ".shard.bin.tmpX"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(n))) << n;
}

// The clean-up of leftover temporaries removes only those whose writer is gone (their lock free):
// a temporary another writer holds locked is left alone, whatever its age.
TEST(AtomicWrite, RemovesDeadTemporariesAndLeavesThoseBeingWritten) {
  TempDir dir;
  const std::string target = dir.file("shard.bin");
  const std::string live = dir.file(".shard.bin.tmpAAAAAA"), dead = dir.file(".shard.bin.tmpBBBBBB");
  std::ofstream(live) << "half";
  std::ofstream(dead) << "half";
  const int fd = ::open(live.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another writer, still writing
  write_file_atomic(target, "new");
  EXPECT_EQ(testing::read_text(target), "new");
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_FALSE(std::filesystem::exists(dead));
  ::close(fd);  // that writer died
  write_file_atomic(target, "newer");
  EXPECT_FALSE(std::filesystem::exists(live));
  EXPECT_EQ(testing::read_text(target), "newer");
}

// Writers of one file at once (threads): every write lands whole, none fails on a temporary that
// another writer's clean-up removed.
TEST(AtomicWrite, ConcurrentWritersOfOneFileNeverLoseTheirTemporary) {
  TempDir dir;
  const std::string target = dir.file("f");
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    ts.emplace_back([&, w] {
      for (int i = 0; i < 200; ++i) try {
          write_file_atomic(target, std::string(1000, char('a' + w)));
        } catch (const std::exception&) {
          ++failures;
        }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(testing::read_text(target).size(), 1000u);
}

// A second holder of a directory's lock is refused, naming the flag, the directory and the pid.
TEST(DirLock, ASecondHolderIsRefusedAndTheLockIsFreedWithItsHolder) {
  TempDir tmp;
  const std::string d = tmp.file("ck");
  std::filesystem::create_directories(d);
  {
    DirLock first(d, "--save");
    try {
      DirLock second(d, "--save");
      ADD_FAILURE() << "a second lock was taken";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--save " + d + ": another ptdp run writes there"), std::string::npos) << m;
      EXPECT_NE(m.find("pid " + std::to_string(::getpid())), std::string::npos) << m;
    }
  }
  EXPECT_NO_THROW(DirLock again(d, "--save"));
}

}  // namespace
}  // namespace ptdp
