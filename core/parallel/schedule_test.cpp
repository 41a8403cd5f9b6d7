// Pipeline schedules: each action once and in a legal order, no deadlock when all stages are
// replayed, the paper's bubble fractions on unit costs, in-flight limits, layer placement.
#include "core/parallel/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "core/common/error.h"
#include "core/sim/replay.h"

namespace ptdp {
namespace {

struct Grid {
  ScheduleKind kind;
  int p, m, v;
};

// p in {1,2,4,8}; m in {p,2p,4p,8p} (and m < p for gpipe/1f1b); v in {2,3,4} for interleaved.
std::vector<Grid> grid() {
  std::vector<Grid> g;
  for (int p : {1, 2, 4, 8}) {
    std::vector<int> ms = {p, 2 * p, 4 * p, 8 * p};
    std::vector<int> small = ms;
    for (int m = 1; m < p; m = m * 2 + 1) small.push_back(m);
    for (int m : small) {
      g.push_back({ScheduleKind::GPipe, p, m, 1});
      g.push_back({ScheduleKind::OneFOneB, p, m, 1});
    }
    for (int m : ms)
      for (int v : {2, 3, 4}) g.push_back({ScheduleKind::Interleaved, p, m, v});
  }
  return g;
}

std::string label(const Grid& g) {
  return fmt::format("{} p={} m={} v={}", enum_name(g.kind), g.p, g.m, g.v);
}

TEST(Schedule, ParsesTheThreeNamesAndRefusesOthers) {
  for (auto k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    EXPECT_EQ(parse_enum<ScheduleKind>(enum_name(k), "--schedule"), k);
  try {
    parse_enum<ScheduleKind>("zigzag", "--schedule");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--schedule 'zigzag' must be gpipe, 1f1b or interleaved");
  }
}

TEST(Schedule, EveryForwardAndBackwardRunsOnceAndForwardComesFirst) {
  for (const Grid& g : grid()) {
    for (int s = 0; s < g.p; ++s) {
      const auto acts = make_schedule(g.kind, g.p, g.m, g.v, s);
      std::map<std::pair<int, int>, int> fwd_at, bwd_at;
      for (int i = 0; i < int(acts.size()); ++i) {
        const Action& a = acts[i];
        ASSERT_TRUE(a.microbatch >= 0 && a.microbatch < g.m && a.chunk >= 0 && a.chunk < g.v) << label(g);
        if (a.op == Op::Forward) {
          EXPECT_TRUE(fwd_at.emplace(std::pair{a.microbatch, a.chunk}, i).second) << label(g);
        }
        if (a.op == Op::Backward) {
          EXPECT_TRUE(bwd_at.emplace(std::pair{a.microbatch, a.chunk}, i).second) << label(g);
        }
      }
      ASSERT_EQ(int(fwd_at.size()), g.m * g.v) << label(g) << " stage " << s;
      ASSERT_EQ(int(bwd_at.size()), g.m * g.v) << label(g) << " stage " << s;
      for (auto [key, i] : fwd_at) EXPECT_LT(i, bwd_at.at(key)) << label(g) << " stage " << s;
    }
  }
}

TEST(Schedule, ReceivesPrecedeAndSendsFollowTheirComputeExceptAtThePipelineEnds) {
  for (const Grid& g : grid()) {
    for (int s = 0; s < g.p; ++s) {
      const auto acts = make_schedule(g.kind, g.p, g.m, g.v, s);
      size_t sends = 0, recvs = 0;
      for (size_t i = 0; i < acts.size(); ++i) {
        const Action& a = acts[i];
        const bool first = s == 0 && a.chunk == 0, last = s == g.p - 1 && a.chunk == g.v - 1;
        auto at = [&](size_t j) { return j < acts.size() ? acts[j] : Action{Op::Forward, -1, -1}; };
        if (a.op == Op::Forward) {
          const bool recv_before = i > 0 && at(i - 1) == Action{Op::RecvForward, a.microbatch, a.chunk};
          const bool send_after = at(i + 1) == Action{Op::SendForward, a.microbatch, a.chunk};
          EXPECT_EQ(recv_before, !first) << label(g);
          EXPECT_EQ(send_after, !last) << label(g);
        }
        if (a.op == Op::Backward) {
          const bool recv_before = i > 0 && at(i - 1) == Action{Op::RecvBackward, a.microbatch, a.chunk};
          const bool send_after = at(i + 1) == Action{Op::SendBackward, a.microbatch, a.chunk};
          EXPECT_EQ(recv_before, !last) << label(g);
          EXPECT_EQ(send_after, !first) << label(g);
        }
        sends += a.op == Op::SendForward || a.op == Op::SendBackward;
        recvs += a.op == Op::RecvForward || a.op == Op::RecvBackward;
      }
      EXPECT_EQ(sends, recvs) << label(g);  // as many messages in as out on every stage
    }
  }
}

// Replays all p stages: t_f = 1, t_b = 2 per micro-batch, split evenly over v chunks (costs
// scaled by v so that they stay integers), p2p free.
sim::ReplayResult unit_replay(const Grid& g) {
  sim::ReplayInput in{g.kind, g.p, g.m, g.v, {}, {}};
  in.costs.assign(size_t(g.p) * g.v, sim::ChunkCosts{});
  for (auto& c : in.costs) {
    c.forward = 1;
    c.backward = 2;
  }
  return sim::replay(in);
}

TEST(Schedule, UnitCostReplayNeverDeadlocksAndHasThePapersBubble) {
  for (const Grid& g : grid()) {
    const sim::ReplayResult r = unit_replay(g);
    ASSERT_FALSE(r.deadlock) << label(g) << ": " << r.deadlock_detail;
    // Ideal time t_id = m (t_f + t_b); bubble t_pb = (p-1)(t_f + t_b) / v. In units of 1/v: 3mv and 3(p-1).
    const double ideal = 3.0 * g.m * g.v, bubble = 3.0 * (g.p - 1);
    EXPECT_DOUBLE_EQ(r.makespan, ideal + bubble) << label(g);
    const double expected = g.kind == ScheduleKind::Interleaved ? double(g.p - 1) / (g.v * g.m)
                                                                : double(g.p - 1) / g.m;
    EXPECT_NEAR(sim::bubble_fraction(r), expected, 1e-12) << label(g);
  }
}

TEST(Schedule, OneFOneBKeepsAtMostPMicrobatchesInFlightAndGPipeKeepsAllM) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, p, 4 * p, 8 * p}) {
      const auto f1b = unit_replay({ScheduleKind::OneFOneB, p, m, 1});
      const auto gp = unit_replay({ScheduleKind::GPipe, p, m, 1});
      EXPECT_EQ(f1b.stages[0].peak_in_flight, std::min(p, m)) << "p=" << p << " m=" << m;
      EXPECT_EQ(gp.stages[0].peak_in_flight, m) << "p=" << p << " m=" << m;
      for (int s = 0; s < p; ++s) EXPECT_LE(f1b.stages[s].peak_in_flight, std::min(p - s, m));
    }
}

TEST(Schedule, InterleavedVisitsChunksInGroupsOfPAsMegatron) {
  // p=2, m=4, v=2, stage 1: warm-up (2-1-1)*2 + (2-1)*2 = 2 forwards: virtual 0,1 = mb 0,1 on chunk 0.
  const auto acts = make_schedule(ScheduleKind::Interleaved, 2, 4, 2, 1);
  std::vector<std::pair<int, int>> fwd, bwd;
  for (const Action& a : acts) {
    if (a.op == Op::Forward) fwd.push_back({a.microbatch, a.chunk});
    if (a.op == Op::Backward) bwd.push_back({a.microbatch, a.chunk});
  }
  const std::vector<std::pair<int, int>> want_fwd = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  const std::vector<std::pair<int, int>> want_bwd = {{0, 1}, {1, 1}, {0, 0}, {1, 0}, {2, 1}, {3, 1}, {2, 0}, {3, 0}};
  EXPECT_EQ(fwd, want_fwd);
  EXPECT_EQ(bwd, want_bwd);
  // Stage 0 warms up with (2-0-1)*2 + 2 = 4 forwards before its first backward.
  const auto s0 = make_schedule(ScheduleKind::Interleaved, 2, 4, 2, 0);
  int forwards_before_backward = 0;
  for (const Action& a : s0) {
    if (a.op == Op::Backward) break;
    forwards_before_backward += a.op == Op::Forward;
  }
  EXPECT_EQ(forwards_before_backward, 5);  // 4 warm-up, then the first steady-state forward
}

TEST(Schedule, InterleavedRefusesMNotAMultipleOfP) {
  EXPECT_THROW(make_schedule(ScheduleKind::Interleaved, 4, 6, 2, 0), RuntimeError);
  EXPECT_THROW(make_schedule(ScheduleKind::OneFOneB, 4, 8, 2, 0), RuntimeError);  // v > 1 needs interleaved
}

TEST(Schedule, ForwardSendsReachTheNextStageAndWrapToTheNextChunk) {
  EXPECT_EQ(forward_peer(4, 1, 0).stage, 2);
  EXPECT_EQ(forward_peer(4, 3, 0).stage, 0);
  EXPECT_EQ(forward_peer(4, 3, 0).chunk, 1);
  EXPECT_EQ(backward_peer(4, 0, 1).stage, 3);
  EXPECT_EQ(backward_peer(4, 0, 1).chunk, 0);
}

}  // namespace
}  // namespace ptdp
