// ptdp's temporaries: their names, and the removal of those whose process is gone.
#include "core/common/temporary_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

namespace ptdp {
namespace {

namespace fs = std::filesystem;

// A process id that ran and is gone (a child that exited and was reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

std::string this_host() {
  char buf[HOST_NAME_MAX + 1] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

class TemporaryFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptdp-tmpfiles-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const std::string& name) { std::ofstream(dir_ / name) << "x"; }
  bool exists(const std::string& name) { return fs::exists(dir_ / name); }
  fs::path dir_;
};

TEST_F(TemporaryFiles, ANameSaysWhoseItIsAndIsUniqueInTheProcess) {
  const std::string a = temporary_path("d/x.npy"), b = temporary_path("d/x.npy");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("d/x.npy.ptdp-tmp." + this_host() + "." + std::to_string(::getpid()) + ".", 0), 0u) << a;
}

TEST_F(TemporaryFiles, OnlyTheDeadProcessesTemporariesOfTheNamedFilesAreRemoved) {
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getppid());
  const std::string host = this_host();
  const std::vector<std::string> removed = {
      "a.npy.ptdp-tmp." + host + "." + dead + ".0",
      "a.npy.tmp-" + dead + "-3",  // the names of earlier versions
      "a.npy.tmp." + dead + ".7",
  };
  const std::vector<std::string> kept = {
      "a.npy.ptdp-tmp." + host + "." + live + ".0",                        // its writer runs
      "a.npy.ptdp-tmp." + host + "." + std::to_string(::getpid()) + ".9",  // this process's own
      "a.npy.ptdp-tmp.other-host.example." + dead + ".0",                  // another host's (a shared disk)
      "b.npy.ptdp-tmp." + host + "." + dead + ".0",                        // not a file asked about
      ".a.npy.tmpAbC123",                                                  // a user's file
      "a.npy",
      "a.npy.tmp-x-1",
  };
  for (const auto& n : removed) touch(n);
  for (const auto& n : kept) touch(n);
  EXPECT_EQ(remove_dead_temporaries(dir_.string(), [](const std::string& t) { return t == "a.npy"; }),
            static_cast<int>(removed.size()));
  for (const auto& n : removed) EXPECT_FALSE(exists(n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(exists(n)) << n;
}

}  // namespace
}  // namespace ptdp
