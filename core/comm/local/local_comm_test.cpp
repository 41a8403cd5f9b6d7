// The local communicator against serial references: every collective for sizes from 1 to 1M
// elements (also not divisible by the group), in place and out of place, p2p, split, faults.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/comm/local/local_comm.h"

namespace ptdp {
namespace {

// Rank-dependent values whose sums are exact in f32.
float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 29) - 14.0f; }

class LocalCollectives : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

TEST_P(LocalCollectives, MatchSerialReference) {
  const auto [n, count] = GetParam();
  run_local_ranks(n, [&, n = n, count = count](int r, Communicator& c) {
    ASSERT_EQ(c.rank(), r);
    ASSERT_EQ(c.size(), n);
    // all_reduce sum and max, in place
    Tensor x = Tensor::empty({count}, DType::F32);
    for (int64_t i = 0; i < count; ++i) x.data<float>()[i] = value(r, i);
    Tensor y = x.clone();
    c.all_reduce(x, ReduceOp::Sum);
    c.all_reduce(y, ReduceOp::Max);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      float s = 0, m = -1e30f;
      for (int q = 0; q < n; ++q) s += value(q, i), m = std::max(m, value(q, i));
      wrong += x.data<float>()[i] != s || y.data<float>()[i] != m;
    }
    EXPECT_EQ(wrong, 0) << "all_reduce";
    // reduce_scatter (out of place) then all_gather back: the all-reduced vector
    Tensor in = Tensor::empty({count}, DType::F32);
    for (int64_t i = 0; i < count; ++i) in.data<float>()[i] = value(r, i);
    ChunkRange mine = chunk_range(count, n, r);
    Tensor part = Tensor::empty({mine.size()}, DType::F32);
    c.reduce_scatter(in, part, ReduceOp::Sum);
    Tensor full = Tensor::empty({count}, DType::F32);
    c.all_gather(part, full);
    wrong = 0;
    for (int64_t i = 0; i < count; ++i) wrong += full.data<float>()[i] != x.data<float>()[i];
    EXPECT_EQ(wrong, 0) << "reduce_scatter + all_gather";
    // broadcast from the last rank
    Tensor b = Tensor::empty({count}, DType::F32);
    for (int64_t i = 0; i < count; ++i) b.data<float>()[i] = value(r, i);
    c.broadcast(b, n - 1);
    wrong = 0;
    for (int64_t i = 0; i < count; ++i) wrong += b.data<float>()[i] != value(n - 1, i);
    EXPECT_EQ(wrong, 0) << "broadcast";
  });
}

INSTANTIATE_TEST_SUITE_P(SizesAndGroups, LocalCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values<int64_t>(1, 7, 1000, 1 << 20)));

TEST(LocalComm, ChunkRangesCoverEveryElementOnce) {
  for (int n : {1, 3, 8})
    for (int64_t count : {0, 1, 7, 64}) {
      int64_t next = 0;
      for (int r = 0; r < n; ++r) {
        ChunkRange c = chunk_range(count, n, r);
        EXPECT_EQ(c.begin, next);
        next = c.end;
      }
      EXPECT_EQ(next, count);
    }
}

TEST(LocalComm, SendRecvDeliverInOrderPerTag) {
  run_local_ranks(3, [](int r, Communicator& c) {
    Tensor t = Tensor::empty({5}, DType::F64);
    if (r == 0) {
      for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < 5; ++i) t.data<double>()[i] = 10 * k + i;
        c.send(t, 2, 7);
      }
      t.data<double>()[0] = -1;
      c.isend(t, 1, 9).wait();
    } else if (r == 2) {
      for (int k = 0; k < 3; ++k) {
        c.recv(t, 0, 7);
        EXPECT_EQ(t.data<double>()[4], 10 * k + 4);
      }
    } else {
      CommHandle h = c.irecv(t, 0, 9);
      h.wait();
      EXPECT_EQ(t.data<double>()[0], -1);
    }
  });
}

TEST(LocalComm, SplitMakesMegatronStyleGroups) {
  // 8 ranks, groups of even and odd ranks ordered by descending rank.
  run_local_ranks(8, [](int r, Communicator& c) {
    auto sub = c.split(r % 2, -r);
    EXPECT_EQ(sub->size(), 4);
    EXPECT_EQ(sub->rank(), (7 - r) / 2);
    Tensor x = Tensor::empty({1}, DType::I32);
    x.data<int32_t>()[0] = r;
    sub->all_reduce(x, ReduceOp::Sum);
    EXPECT_EQ(x.data<int32_t>()[0], r % 2 ? 1 + 3 + 5 + 7 : 0 + 2 + 4 + 6);
  });
}

TEST(LocalComm, AsyncAllReducesCompleteInCallOrder) {
  run_local_ranks(4, [](int r, Communicator& c) {
    std::vector<Tensor> ts;
    std::vector<CommHandle> hs;
    for (int k = 0; k < 6; ++k) {
      ts.push_back(Tensor::empty({1000}, DType::F32));
      for (int i = 0; i < 1000; ++i) ts.back().data<float>()[i] = float(k + r);
    }
    for (auto& t : ts) hs.push_back(c.all_reduce_async(t, ReduceOp::Sum));
    for (auto& h : hs) h.wait();
    for (int k = 0; k < 6; ++k) EXPECT_EQ(ts[k].data<float>()[999], float(4 * k + 6));
  });
}

// A blocking collective runs on the caller's thread only when nothing is queued before it: behind
// asynchronous ones it waits its turn (ranks that issued different numbers of asynchronous calls
// before it still meet in call order).
TEST(LocalComm, BlockingCollectivesKeepCallOrderBehindAsynchronousOnes) {
  run_local_ranks(4, [](int r, Communicator& c) {
    for (int round = 0; round < 20; ++round) {
      Tensor a = Tensor::empty({4096}, DType::F32), b = Tensor::empty({1}, DType::F32);
      for (int i = 0; i < 4096; ++i) a.data<float>()[i] = float(r + round);
      b.data<float>()[0] = float(10 * r);
      CommHandle h = c.all_reduce_async(a, ReduceOp::Sum);
      if ((r + round) % 2) h.wait();  // half the ranks: nothing queued when the blocking call comes
      c.all_reduce(b, ReduceOp::Sum);
      h.wait();
      EXPECT_EQ(a.data<float>()[4095], float(6 + 4 * round));
      EXPECT_EQ(b.data<float>()[0], 60.0f);
    }
  });
}

TEST(LocalComm, ARankThatNeverArrivesMakesTheOthersFailNamingIt) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    run_local_ranks(
        3,
        [](int r, Communicator& c) {
          Tensor x = Tensor::zeros({4}, DType::F32);
          if (r == 1) return;  // rank 1 leaves without joining the all-reduce
          c.all_reduce(x, ReduceOp::Sum);
        },
        std::chrono::milliseconds(300));
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 did not arrive at all_reduce"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(LocalComm, ARankThatFailsStopsTheOthersAtOnce) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    run_local_ranks(4, [](int r, Communicator& c) {
      Tensor x = Tensor::zeros({4}, DType::F32);
      if (r == 2) throw RuntimeError("injected failure on rank 2");
      c.all_reduce(x, ReduceOp::Sum);
      c.barrier();
    });  // default timeout of 300 s: only the abort can end this quickly
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure on rank 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(LocalComm, AMissingMessageTimesOutNamingTheSender) {
  try {
    run_local_ranks(
        2,
        [](int r, Communicator& c) {
          Tensor x = Tensor::zeros({4}, DType::F32);
          if (r == 0) c.recv(x, 1, 3);
        },
        std::chrono::milliseconds(200));
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("from rank 1 (tag 3)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptdp
