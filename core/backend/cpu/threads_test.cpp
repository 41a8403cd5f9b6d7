// The process's thread budget follows OMP_NUM_THREADS as OpenMP reads it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/backend/cpu/threads.h"
#include "core/testing/scoped_env.h"

namespace ptdp {
namespace {

TEST(CpuThreads, BudgetIsOmpNumThreadsWhenSetElseEveryCore) {
  const testing::ScopedEnv guard("OMP_NUM_THREADS");
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(cpu_thread_budget(), 3);
  setenv("OMP_NUM_THREADS", "5,2", 1);  // nested list: the outer level
  EXPECT_EQ(cpu_thread_budget(), 5);
  for (const char* bad : {"", "0", "-2", "two", "4x"}) {
    setenv("OMP_NUM_THREADS", bad, 1);
    EXPECT_EQ(cpu_thread_budget(), cores) << "'" << bad << "'";
  }
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(cpu_thread_budget(), cores);
}

}  // namespace
}  // namespace ptdp
