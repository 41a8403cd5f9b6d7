// The NCCL matching engine on its own: host threads stand in for stream workers and a test
// executor moves host memory. Every wait in these tests has a deadline.
#include "nccl/rendezvous.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "nccl/nccl_test_util.h"
#include "nccl/reduce.h"

namespace vgpu::nccl {
namespace {

using namespace std::chrono_literals;
using nccl_test::Watchdog;

// Sums float collectives and copies sends, in host memory; records mismatches.
class TestExecutor : public Executor {
 public:
  void collective(const Op* const* parts, int n) override {
    std::vector<const void*> in;
    for (int r = 0; r < n; ++r) in.push_back(parts[r]->send);
    std::vector<float> sum(parts[0]->count);
    reduce(parts[0]->dtype, parts[0]->redop, in.data(), n, sum.data(), parts[0]->count);
    for (int r = 0; r < n; ++r) std::memcpy(parts[r]->recv, sum.data(), sum.size() * sizeof(float));
    ++collectives;
  }
  void transfer(const Op& send, int, const Op& recv, int) override {
    std::memcpy(recv.recv, send.send, send.count * sizeof(float));
    ++transfers;
  }
  std::string mismatch(const Op* const*, const int*, int, const std::string& reason) override {
    std::lock_guard lk(mu);
    reasons.push_back(reason);
    return "mismatch: " + reason;
  }
  std::atomic<int> collectives{0}, transfers{0};
  std::mutex mu;
  std::vector<std::string> reasons;
};

Op allreduce(Clique& c, int rank, const float* send, float* recv, size_t count) {
  Op op;
  op.kind = Kind::AllReduce;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.dtype = ncclFloat32;
  op.redop = ncclSum;
  op.seq = c.issue_collective(rank);
  return op;
}
Op send_op(Clique& c, int rank, int peer, const float* buf, size_t count) {
  Op op;
  op.kind = Kind::Send;
  op.send = buf;
  op.count = count;
  op.root = peer;
  op.seq = c.issue_send(rank, peer);
  return op;
}
Op recv_op(Clique& c, int rank, int peer, float* buf, size_t count) {
  Op op;
  op.kind = Kind::Recv;
  op.recv = buf;
  op.count = count;
  op.root = peer;
  op.seq = c.issue_recv(rank, peer);
  return op;
}

// Runs fn(rank) on n threads; fails (instead of hanging) if they are not done within 20 s.
template <class F>
void on_threads(int n, F fn) {
  std::vector<std::future<void>> fs;
  for (int r = 0; r < n; ++r) fs.push_back(std::async(std::launch::async, fn, r));
  for (auto& f : fs) ASSERT_EQ(f.wait_for(20s), std::future_status::ready) << "a rank hung";
}

TEST(NcclRendezvous, CollectivesMatchByIssueOrderAndGiveEveryRankTheSameSum) {
  Watchdog watchdog;
  Clique c(3);
  TestExecutor ex;
  std::vector<std::vector<float>> out(3, std::vector<float>(2 * 4));
  on_threads(3, [&](int r) {
    std::vector<float> a{float(r), 1, 2, 3}, b{10.0f * r, 0, 0, 1};
    Op ops[2] = {allreduce(c, r, a.data(), out[r].data(), 4), allreduce(c, r, b.data(), out[r].data() + 4, 4)};
    EXPECT_TRUE(c.run(r, &ops[0], 1, ex));  // separate stream items, in order
    EXPECT_TRUE(c.run(r, &ops[1], 1, ex));
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], (std::vector<float>{3, 3, 6, 9, 30, 0, 0, 3}));
  EXPECT_EQ(ex.collectives, 2);
}

TEST(NcclRendezvous, ManyCollectivesInOneItemGrowTheSlotRing) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  const int k = 100;
  std::vector<std::vector<float>> out(2, std::vector<float>(k));
  on_threads(2, [&](int r) {
    std::vector<float> in(k);
    std::vector<Op> ops;
    for (int i = 0; i < k; ++i) {
      in[i] = float(i + r);
      ops.push_back(allreduce(c, r, &in[i], &out[r][i], 1));
    }
    EXPECT_TRUE(c.run(r, ops.data(), ops.size(), ex));
  });
  for (int i = 0; i < k; ++i) EXPECT_EQ(out[1][i], float(2 * i + 1));
  EXPECT_EQ(out[0], out[1]);
}

TEST(NcclRendezvous, GroupedSendAndReceiveBetweenTwoRanksComplete) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::vector<std::vector<float>> got(2, std::vector<float>(3, -1));
  on_threads(2, [&](int r) {
    std::vector<float> mine{float(r), float(r), float(r)};
    const int peer = 1 - r;
    Op ops[2] = {send_op(c, r, peer, mine.data(), 3), recv_op(c, r, peer, got[r].data(), 3)};
    EXPECT_TRUE(c.run(r, ops, 2, ex));  // one stream item: both posted, then waited for
  });
  EXPECT_EQ(got[0], (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(got[1], (std::vector<float>{0, 0, 0}));
}

TEST(NcclRendezvous, UngroupedSendsToEachOtherDeadlockUntilBothRanksAbort) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::atomic<int> returned{0};
  std::vector<float> buf0(4, 0), buf1(4, 1);
  std::vector<std::future<bool>> fs;
  for (int r = 0; r < 2; ++r)
    fs.push_back(std::async(std::launch::async, [&, r] {
      Op s = send_op(c, r, 1 - r, r ? buf1.data() : buf0.data(), 4);
      const bool ok = c.run(r, &s, 1, ex);  // each rank's send waits for a receive never posted
      ++returned;
      return ok;
    }));
  EXPECT_EQ(fs[0].wait_for(200ms), std::future_status::timeout);  // cannot complete: no receive
  EXPECT_EQ(returned, 0);
  c.abort(0);
  ASSERT_EQ(fs[0].wait_for(20s), std::future_status::ready);
  EXPECT_FALSE(fs[0].get());
  EXPECT_EQ(fs[1].wait_for(100ms), std::future_status::timeout);  // the peer keeps waiting, as on a GPU
  c.abort(1);
  ASSERT_EQ(fs[1].wait_for(20s), std::future_status::ready);
  EXPECT_FALSE(fs[1].get());
  EXPECT_EQ(ex.transfers, 0);
}

TEST(NcclRendezvous, AnAbortedRanksPostedPartIsNeverExecuted) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::vector<float> in0{1}, in1{2}, out0{-1}, out1{-1};
  Op op0 = allreduce(c, 0, in0.data(), out0.data(), 1);
  auto f0 = std::async(std::launch::async, [&] { return c.run(0, &op0, 1, ex); });
  EXPECT_EQ(f0.wait_for(50ms), std::future_status::timeout);
  c.abort(0);
  ASSERT_EQ(f0.wait_for(20s), std::future_status::ready);
  EXPECT_FALSE(f0.get());
  Op op1 = allreduce(c, 1, in1.data(), out1.data(), 1);
  auto f1 = std::async(std::launch::async, [&] { return c.run(1, &op1, 1, ex); });
  EXPECT_EQ(f1.wait_for(100ms), std::future_status::timeout);  // rank 0 never arrives again
  EXPECT_EQ(ex.collectives, 0);
  c.abort(1);
  ASSERT_EQ(f1.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(out0[0], -1.0f);
  EXPECT_EQ(out1[0], -1.0f);
}

TEST(NcclRendezvous, RunAfterAbortReturnsAtOnce) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  c.abort(1);
  EXPECT_TRUE(c.aborted(1));
  std::vector<float> in{1}, out{0};
  Op op = allreduce(c, 1, in.data(), out.data(), 1);
  EXPECT_FALSE(c.run(1, &op, 1, ex));
}

TEST(NcclRendezvous, MismatchedCountsAreReportedAndCompleteWithAnAsyncError) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::vector<float> in(8, 1), out(8, -1);
  on_threads(2, [&](int r) {
    Op op = allreduce(c, r, in.data(), out.data(), r == 0 ? 4 : 8);
    EXPECT_TRUE(c.run(r, &op, 1, ex));
  });
  ASSERT_EQ(ex.reasons.size(), 1u);
  EXPECT_EQ(ex.reasons[0], "the counts differ");
  EXPECT_EQ(ex.collectives, 0);
  std::string msg;
  EXPECT_EQ(c.error(0, &msg), ncclInvalidUsage);
  EXPECT_EQ(msg, "mismatch: the counts differ");
  EXPECT_EQ(c.error(1), ncclInvalidUsage);
}

TEST(NcclRendezvous, DifferentCollectivesAtTheSamePositionAreAMismatch) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::vector<float> in(4, 1), out(4, -1);
  on_threads(2, [&](int r) {
    Op op = allreduce(c, r, in.data(), out.data(), 4);
    if (r == 1) {
      op.kind = Kind::Broadcast;
      op.root = 0;
    }
    EXPECT_TRUE(c.run(r, &op, 1, ex));
  });
  ASSERT_EQ(ex.reasons.size(), 1u);
  EXPECT_EQ(ex.reasons[0], "the collectives differ");
}

TEST(NcclRendezvous, SendAndReceiveWithDifferentTypesAreAMismatch) {
  Watchdog watchdog;
  Clique c(2);
  TestExecutor ex;
  std::vector<float> buf(4, 1), got(4, -1);
  on_threads(2, [&](int r) {
    Op op = r == 0 ? send_op(c, 0, 1, buf.data(), 4) : recv_op(c, 1, 0, got.data(), 4);
    if (r == 1) op.dtype = ncclInt32;
    EXPECT_TRUE(c.run(r, &op, 1, ex));
  });
  ASSERT_EQ(ex.reasons.size(), 1u);
  EXPECT_EQ(ex.reasons[0], "the datatypes differ");
  EXPECT_EQ(got[0], -1.0f);
}

TEST(NcclRendezvous, SplitGroupsByColourOrdersByKeyThenRank) {
  Watchdog watchdog;
  Clique c(4, {4, 5, 6, 7});
  std::vector<Clique::SplitResult> res(4);
  const int color[] = {0, 1, 0, NCCL_SPLIT_NOCOLOR};
  const int key[] = {5, 0, 5, 0};
  on_threads(4, [&](int r) { EXPECT_TRUE(c.split(r, color[r], key[r], 20s, &res[r], nullptr)); });
  ASSERT_TRUE(res[0].clique);
  EXPECT_EQ(res[0].clique, res[2].clique);
  EXPECT_EQ(res[0].clique->size(), 2);
  EXPECT_EQ(res[0].rank, 0);  // equal keys: parent order
  EXPECT_EQ(res[2].rank, 1);
  EXPECT_EQ(res[2].clique->device(1), 6);
  ASSERT_TRUE(res[1].clique);
  EXPECT_EQ(res[1].clique->size(), 1);
  EXPECT_NE(res[1].clique, res[0].clique);
  EXPECT_FALSE(res[3].clique);

  // Keys reverse the order in a second split.
  const int key2[] = {3, 2, 1, 0};
  on_threads(4, [&](int r) { EXPECT_TRUE(c.split(r, 7, key2[r], 20s, &res[r], nullptr)); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(res[r].rank, 3 - r);
  EXPECT_EQ(res[0].members, (std::vector<int>{3, 2, 1, 0}));
}

TEST(NcclRendezvous, SplitGivesUpWhenARankNeverArrives) {
  Watchdog watchdog;
  Clique c(2);
  Clique::SplitResult res;
  int arrived = 0;
  EXPECT_FALSE(c.split(0, 0, 0, 50ms, &res, &arrived));
  EXPECT_EQ(arrived, 1);
}

TEST(NcclRendezvous, WaitIdleReturnsWhenItemsFinishAndGivesUpWhenStuck) {
  Watchdog watchdog;
  Clique c(2);
  c.add_in_flight(0, 1);
  auto done = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(20ms);
    c.add_in_flight(0, -1);
  });
  int left = -1;
  EXPECT_TRUE(c.wait_idle(0, 20s, &left));
  done.get();
  c.add_in_flight(1, 2);
  EXPECT_FALSE(c.wait_idle(1, 50ms, &left));
  EXPECT_EQ(left, 2);
}

}  // namespace
}  // namespace vgpu::nccl
