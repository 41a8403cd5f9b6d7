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

// A save killed before its rename leaves ".NAME.ptdp-tmp-XXXXXX" behind; the next write of NAME
// removes it, and nothing else (".NAME.tmpXXXXXX" is a name a user may give).
TEST(AtomicWrite, AWriteRemovesTheTemporariesEarlierWritesOfItsTargetLeft) {
  TempDir dir;
  const std::string target = dir.file("shard.bin");
  for (const char* n : {".shard.bin.ptdp-tmp-Ab12Cd", ".other.bin.ptdp-tmp-Ab12Cd", "shard.bin.ptdp-tmp-Ab12Cd",
                        ".shard.bin.ptdp-tmp-X", ".shard.bin.tmpAb12Cd"})
    std::ofstream(dir.file(n)) << "x";
  write_file_atomic(target, "new");
  EXPECT_EQ(testing::read_text(target), "new");
  EXPECT_FALSE(std::filesystem::exists(dir.file(".shard.bin.ptdp-tmp-Ab12Cd")));
  for (const char* n : {".other.bin.ptdp-tmp-Ab12Cd", "shard.bin.ptdp-tmp-Ab12Cd", ".shard.bin.ptdp-tmp-X",
                        ".shard.bin.tmpAb12Cd"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(n))) << n;
}

// Taking a --save directory removes the dead temporaries of ptdp's own writes in the folders a
// checkpoint has, and no file of the user's: not one named like a temporary of another program
// (".X.tmpXXXXXX"), nor a ptdp-like name in a folder ptdp does not write.
TEST(DirLock, RemovesOnlyPtdpsOwnDeadTemporariesWherePtdpWrites) {
  TempDir dir;
  namespace fs = std::filesystem;
  const std::string ck = dir.file("ck");
  for (const char* d : {"iter_0000002/mp_rank_01_000", "notes/drafts", "iter_0000002/mine"}) fs::create_directories(ck + "/" + d);
  const std::vector<std::string> removed = {".latest_checkpointed_iteration.txt.ptdp-tmp-Ab12Cd",
                                            "iter_0000002/.manifest.txt.ptdp-tmp-Ab12Cd",
                                            "iter_0000002/mp_rank_01_000/.model_optim_rng.bin.ptdp-tmp-Zz9yX8"};
  const std::vector<std::string> kept = {".report.tmpAb12Cd", "notes/.essay.md.tmpQw3rTy", "notes/drafts/.a.ptdp-tmp-Ab12Cd",
                                         "iter_0000002/mine/.x.ptdp-tmp-Ab12Cd", "iter_0000002/.manifest.txt.tmpAb12Cd"};
  for (const auto& n : removed) std::ofstream(ck + "/" + n) << "x";
  for (const auto& n : kept) std::ofstream(ck + "/" + n) << "x";
  { DirLock lock(ck, "--save"); }
  for (const auto& n : removed) EXPECT_FALSE(fs::exists(ck + "/" + n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(ck + "/" + n)) << n;
}

// The clean-up of leftover temporaries removes only those whose writer is gone (their lock free):
// a temporary another writer holds locked is left alone, whatever its age.
TEST(AtomicWrite, RemovesDeadTemporariesAndLeavesThoseBeingWritten) {
  TempDir dir;
  const std::string target = dir.file("shard.bin");
  const std::string live = dir.file(".shard.bin.ptdp-tmp-AAAAAA"), dead = dir.file(".shard.bin.ptdp-tmp-BBBBBB");
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
