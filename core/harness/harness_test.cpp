// The measurement harness: the order of its calls, its rates from a clock that returns fixed
// times, the statistics of repetitions, and the collectives' closed-form checks over thread ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/local/local_comm.h"
#include "core/harness/collectives.h"
#include "core/harness/cpu_workloads.h"
#include "core/harness/harness.h"

namespace ptdp::harness {
namespace {

// A workload and a clock that log what the engine calls; every timed interval lasts `seconds`.
struct Logged {
  std::vector<std::string> log;
  Workload w;
  Clock clock;
  explicit Logged(double seconds) {
    w.work = 6e9;
    w.bus_factor = 1.5;
    w.init = [this] { log.push_back("init"); };
    w.run = [this] { log.push_back("run"); };
    w.check = [this] {
      log.push_back("check");
      return int64_t(3);
    };
    w.reset = [this] { log.push_back("reset"); };
    clock.ready = [this] { log.push_back("ready"); };
    clock.time = [this, seconds](const std::function<void()>& calls) {
      log.push_back("start");
      calls();
      log.push_back("stop");
      return seconds;
    };
  }
};

TEST(Harness, TheFirstCallIsCheckedThenWarmUpCallsThenEachRepetitionIsTimedAfterItsResetAndReady) {
  Logged l(2.0);
  const Measured m = measure(l.w, l.clock, 2, 2);
  const std::vector<std::string> want = {"init",  "ready", "run", "check", "run",   "run",   "reset", "ready",
                                         "start", "run",   "stop", "reset", "ready", "start", "run",   "stop"};
  EXPECT_EQ(l.log, want);
  EXPECT_EQ(m.wrong, 3);
  // 6e9 bytes in 2 s: 3 GB/s algbw, x 1.5 busbw.
  EXPECT_EQ(m.samples.rates, (std::vector<double>{4.5, 4.5}));
  EXPECT_EQ(alg_rate(l.w, 2.0), 3.0);
}

TEST(Harness, WithoutACheckNoCallIsMadeBeforeTheWarmUp) {
  Logged l(1.0);
  l.w.check = nullptr;
  EXPECT_EQ(prepare(l.w, l.clock, 1), 0);
  EXPECT_EQ(l.log, (std::vector<std::string>{"init", "run"}));
}

TEST(Harness, SeveralCallsInOneIntervalGiveTheTimePerCall) {
  Logged l(0.5);
  l.w.unit = 1e12;
  EXPECT_EQ(time_calls(l.w, l.clock, 5), 0.1);
  EXPECT_EQ(std::count(l.log.begin(), l.log.end(), "run"), 5);
  EXPECT_EQ(l.log.front(), "reset");
  EXPECT_EQ(bus_rate(l.w, 0.1), 6e9 / 0.1 / 1e12 * 1.5);
}

TEST(Harness, WhatRunsOutsideTheTimeCanBeWrapped) {
  Logged l(1.0);
  const Outside paused = [&](const std::function<void()>& before) {
    l.log.push_back("pause");
    before();
    l.log.push_back("resume");
  };
  time_calls(l.w, l.clock, 1, paused);
  EXPECT_EQ(l.log, (std::vector<std::string>{"pause", "reset", "ready", "resume", "start", "run", "stop"}));
  l.log.clear();
  l.w.reset = nullptr;
  l.clock.ready = nullptr;
  time_calls(l.w, l.clock, 1, paused);  // nothing to wrap
  EXPECT_EQ(l.log, (std::vector<std::string>{"start", "run", "stop"}));
}

TEST(Harness, SamplesGiveTheBestAndTheMedian) {
  EXPECT_EQ((Samples{{3, 1, 2}}.best()), 3);
  EXPECT_EQ((Samples{{3, 1, 2}}.median()), 2);
  EXPECT_EQ((Samples{{4, 1, 2, 3}}.median()), 2.5);
  EXPECT_THROW(Samples{}.best(), std::exception);
}

TEST(Harness, BusFactorsFollowTheBusBandwidthRule) {
  EXPECT_EQ(bus_factor(Coll::AllReduce, 4), 1.5);
  EXPECT_EQ(bus_factor(Coll::AllGather, 4), 0.75);
  EXPECT_EQ(bus_factor(Coll::ReduceScatter, 8), 0.875);
  EXPECT_EQ(bus_factor(Coll::Broadcast, 4), 1.0);
  EXPECT_EQ(bus_factor(Coll::SendRecv, 4), 1.0);
  EXPECT_EQ(bus_factor(Coll::AllReduce, 1), 0.0);
  EXPECT_STREQ(coll_name(Coll::ReduceScatter), "reduce_scatter");
}

// Every collective's check finds its results right on 3 ranks (7 elements: chunks of 3, 2, 2),
// and finds one element planted wrong in what the rank received.
TEST(Harness, CollectivesAreRightOnThreadRanksAndAPlantedErrorIsCounted) {
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::SendRecv}) {
    std::mutex mu;
    std::vector<int64_t> wrong(3, -1), planted(3, -1);
    run_local_ranks(3, [&](int rank, Communicator& comm) {
      Collective op{c, &comm, 7};
      const Workload w = op.workload();
      const int64_t found = prepare(w, host_clock(), 0);
      Tensor& out = c == Coll::AllReduce || c == Coll::Broadcast ? op.a : op.b;
      out.data<float>()[out.numel() - 1] += 1;
      std::lock_guard<std::mutex> lock(mu);
      wrong[rank] = found;
      planted[rank] = op.wrong();
      EXPECT_EQ(w.work, 28.0);
      EXPECT_EQ(w.bus_factor, bus_factor(c, 3));
    });
    EXPECT_EQ(wrong, (std::vector<int64_t>{0, 0, 0})) << coll_name(c);
    EXPECT_EQ(planted, (std::vector<int64_t>{1, 1, 1})) << coll_name(c);
  }
}

TEST(Harness, TheSlowestRanksTimeIsEveryRanksAndTheSumsAreOverTheRanks) {
  std::vector<double> seconds(3);
  std::vector<int64_t> sums(3);
  run_local_ranks(3, [&](int rank, Communicator& comm) {
    const Clock clock = slowest_rank_clock(comm, [&] { comm.barrier(); });
    clock.ready();
    seconds[rank] = clock.time([&] { std::this_thread::sleep_for(std::chrono::milliseconds(20 * rank)); });
    sums[rank] = sum_over_ranks(comm, rank + 1);
  });
  EXPECT_EQ(seconds[0], seconds[1]);
  EXPECT_EQ(seconds[0], seconds[2]);
  EXPECT_GE(seconds[0], 0.04);  // rank 2 slept that long
  EXPECT_EQ(sums, (std::vector<int64_t>{6, 6, 6}));
}

TEST(Harness, CpuWorkloadsPassTheirChecksAndGiveOneRatePerRepetition) {
  for (const Workload& w : {sgemm(8, 16, 32), stream_triad(1000)}) {
    const Measured m = measure(w, host_clock(), 0, 3);
    EXPECT_EQ(m.wrong, 0);
    ASSERT_EQ(m.samples.rates.size(), 3u);
    EXPECT_GT(m.samples.best(), 0);
  }
  EXPECT_EQ(sgemm(8, 16, 32).work, 2.0 * 8 * 16 * 32);
  EXPECT_EQ(stream_triad(1000).work, 12000.0);
  EXPECT_EQ(stream_copy(1000).work, 8000.0);
}

}  // namespace
}  // namespace ptdp::harness
