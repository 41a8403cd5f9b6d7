// The signs of load of `ptdp accept`'s CPU checks (accept_load.h): each named in words, none on a
// quiet machine, and the other processes' share of the CPUs from two readings.
#include <gtest/gtest.h>

#include <string>

#include "experiments/accept_load.h"

namespace ptdp {
namespace {

TEST(AcceptLoad, EachSignOfLoadIsNamedAndAQuietRunHasNone) {
  EXPECT_EQ(load_note({0.1, 0.05, 0.95}, 0.5, 0.2, 2), "");
  EXPECT_EQ(load_note({-1, -1, 1}, 0.5, -1, 2), "");  // nothing readable: nothing to say
  EXPECT_EQ(load_note({1.55, -1, 1}, 0.5, 3.1, 2),
            "the load average was 3.10 on 2 CPUs (1.55 per CPU, above 0.5) before the run");
  EXPECT_EQ(load_note({-1, 0.8, 1}, 0.5, -1, 2), "other processes took 0.80 of the CPUs while it ran (above 0.5)");
  EXPECT_EQ(load_note({-1, -1, 0.3}, 0.5, -1, 2),
            "its repetitions spread: the median is 30% of the best (a quiet machine: 50% or more)");
  const std::string all = load_note({1.55, 0.8, 0.3}, 0.5, 3.1, 2);
  EXPECT_NE(all.find("before the run; other processes took"), std::string::npos) << all;
  EXPECT_NE(all.find("while it ran (above 0.5); its repetitions spread"), std::string::npos) << all;
}

TEST(AcceptLoad, OtherProcessesShareIsTheBusyTimeLessThisProcesssOverTheCpus) {
  const CpuTimes before{10, 2, 100, 2}, after{13, 3, 102, 2};  // 3 s busy, 1 s of it ours, over 2 s on 2 CPUs
  EXPECT_DOUBLE_EQ(others_per_cpu(before, after), 0.5);
  EXPECT_DOUBLE_EQ(others_per_cpu(before, CpuTimes{10.5, 2.5, 102, 2}), 0);  // only this process ran
  EXPECT_EQ(others_per_cpu(CpuTimes{}, after), -1);                         // /proc/stat unreadable
  const CpuTimes now = cpu_times_now();
  EXPECT_GE(now.cpus, 1);
  EXPECT_GE(now.busy_s, 0);  // Linux
}

}  // namespace
}  // namespace ptdp
