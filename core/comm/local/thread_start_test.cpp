// More thread ranks than the process can start: one clear error, the started ranks stopped and
// joined (before, std::terminate: "terminate called without an active exception").
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "core/comm/local/local_comm.h"
#include "core/common/error.h"

namespace ptdp {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

size_t virtual_bytes_now() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0;
  f >> pages;
  return pages * size_t(sysconf(_SC_PAGESIZE));
}

TEST(LocalRanks, TooManyThreadsToStartIsOneErrorNotATerminate) {
  if (kAsan) GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit this test sets";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Room for some thread stacks (8 MiB each by default), not for 4096 of them.
    const rlim_t limit = virtual_bytes_now() + (512u << 20);
    rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
      run_local_ranks(4096, [](int, Communicator& c) { c.barrier(); }, std::chrono::seconds(30));
    } catch (const RuntimeError& e) {
      _exit(std::strstr(e.what(), "cannot start 4096 local ranks as threads") ? 0 : 1);
    } catch (...) {
      _exit(2);
    }
    _exit(4);  // every thread started: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WEXITSTATUS(status) == 4) GTEST_SKIP() << "4096 threads started under the limit on this machine";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ptdp
