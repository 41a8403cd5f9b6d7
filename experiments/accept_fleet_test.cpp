// The fleet's verdict (judge_fleet), its gathering over a communicator and the inter-node checks,
// with ranks as threads (local comm). The same through mpirun over 4 simulated nodes, one slowed:
// testing/accept_fleet.sh (CliMpi.AcceptFleetNamesTheSlowNode).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include <fmt/format.h>

#include "core/comm/local/local_comm.h"
#include "experiments/accept_fleet.h"
#ifdef PTDP_HAVE_NCCL
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/comm/nccl/nccl_comm.h"
#include "experiments/accept_gpu.h"
#endif

namespace ptdp {
namespace {

Check fleet_rate(const std::string& metric, double v, bool pass = true) {
  return Check{metric, metric, "GB/s", ">=", v, 1.0, pass, "", "test"};
}

// A profile whose inter-node checks move 1 MiB and have no thresholds of their own.
AcceptProfile one_mib_profile() {
  AcceptProfile p;
  p.path = "test.toml";
  p.internode_mib = 1;
  return p;
}

std::vector<FleetMember> fleet_of(const std::vector<double>& gemm) {
  std::vector<FleetMember> m;
  for (size_t i = 0; i < gemm.size(); ++i)
    m.push_back({"node" + std::to_string(i + 1), "cpu", int(i), {fleet_rate("gemm", gemm[i])}});
  return m;
}

TEST(AcceptFleet, TheSlowNodeIsNamedEvenAboveItsThreshold) {
  const auto members = fleet_of({100, 96, 104, 60, 101});
  const FleetVerdict v = judge_fleet(members, 0.05);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.exclude, std::vector<std::string>{"node4"});
  ASSERT_EQ(v.rows[3].outliers.size(), 1u);
  EXPECT_EQ(v.rows[3].outliers[0].rfind("gemm 60 (the others' median 100.5", 0), 0u) << v.rows[3].outliers[0];
  EXPECT_TRUE(v.rows[3].failed.empty());  // 60 is above the threshold of 1
}

TEST(AcceptFleet, NoiseWithinTheProfilesSpreadNamesNobody) {
  EXPECT_TRUE(judge_fleet(fleet_of({100, 80, 110, 90}), 0.25).passed);
  // The same fleet judged by a 5% floor: the others' three scaled MADs still cover 80.
  EXPECT_TRUE(judge_fleet(fleet_of({100, 80, 110, 90}), 0.05).exclude.empty());
  EXPECT_EQ(judge_fleet(fleet_of({100, 100, 100, 94}), 0.05).exclude, std::vector<std::string>{"node4"});
  EXPECT_TRUE(judge_fleet(fleet_of({100, 100, 100, 96}), 0.05).passed);
}

TEST(AcceptFleet, AFailedCheckExcludesItsNodeOnceAndTwoMembersNameNoOutlier) {
  auto members = fleet_of({100, 40});
  EXPECT_TRUE(judge_fleet(members, 0.05).passed) << "two members: no median to stand out from";
  members.push_back({"node2", "cpu", 2, {fleet_rate("gemm", 100), fleet_rate("p2p", 0.5, false)}});
  const FleetVerdict v = judge_fleet(members, 0.05);
  EXPECT_EQ(v.exclude, std::vector<std::string>{"node2"});  // its two processes, named once
  EXPECT_EQ(v.rows[2].failed, std::vector<std::string>{"p2p"});
}

TEST(AcceptFleet, SkippedChecksNeitherPassNorStandOutAndNothingRunIsNoPass) {
  auto members = fleet_of({100, 100, 100});
  for (auto& m : members)
    m.checks = {skipped_check("internode_p2p", "internode_p2p_gbs", "GB/s", Threshold{}, "one node")};
  const FleetVerdict v = judge_fleet(members, 0.05);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(v.exclude.empty());
}

TEST(AcceptFleet, EveryMembersChecksReachRankZeroInRankOrder) {
  std::vector<FleetMember> got;
  std::mutex mu;
  run_local_ranks(3, [&](int rank, Communicator& comm) {
    FleetMember me{"n\u00e9ud-" + std::to_string(rank), "dev, \"quoted\"", rank,
                   {fleet_rate("gemm", 10.5 * rank),
                    skipped_check("p2p", "p2p_gbs", "GB/s", Threshold{2, "src"}, "why " + std::string(rank * 50, 'x'))}};
    auto all = gather_fleet(comm, me);
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) got = all;
    else EXPECT_TRUE(all.empty());
  });
  ASSERT_EQ(got.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(got[r].node, "n\u00e9ud-" + std::to_string(r));
    EXPECT_EQ(got[r].device, "dev, \"quoted\"");
    EXPECT_EQ(got[r].rank, r);
    ASSERT_EQ(got[r].checks.size(), 2u);
    EXPECT_EQ(got[r].checks[0].value, 10.5 * r);
    EXPECT_TRUE(got[r].checks[0].pass);
    EXPECT_TRUE(got[r].checks[1].skipped);
    EXPECT_TRUE(std::isnan(got[r].checks[1].value));
    EXPECT_EQ(got[r].checks[1].detail, "why " + std::string(r * 50, 'x'));
  }
}

TEST(AcceptFleet, InternodeChecksMeasureBetweenNodesAndSkipOnOne) {
  const AcceptProfile p = one_mib_profile();
  for (const bool one_node : {true, false}) {
    std::vector<std::vector<Check>> got(4);
    run_local_ranks(4, [&](int rank, Communicator& comm) {
      // Two processes per node in the second case: each sends to the next rank on another node.
      got[rank] = internode_checks(comm, one_node ? "solo" : "node" + std::to_string(rank / 2), p, 2);
    });
    for (int r = 0; r < 4; ++r) {
      ASSERT_EQ(got[r].size(), 2u);
      EXPECT_EQ(got[r][0].name, "internode_allreduce");
      EXPECT_EQ(got[r][1].name, "internode_p2p");
      for (const Check& c : got[r]) {
        EXPECT_EQ(c.skipped, one_node) << c.detail;
        if (one_node) continue;
        EXPECT_TRUE(c.pass) << c.detail;
        EXPECT_GT(c.value, 0) << c.detail;
        EXPECT_NE(c.detail.find(" 0 wrong elements"), std::string::npos) << c.detail;
        EXPECT_NE(c.source.find("judged against the fleet's median only"), std::string::npos) << c.source;
      }
    }
    if (!one_node) {
      EXPECT_EQ(got[0][0].value, got[3][0].value) << "the all-reduce's figure is the job's";
      EXPECT_NE(got[1][1].detail.find("sent to rank 2 on node1"), std::string::npos) << got[1][1].detail;
      EXPECT_NE(got[2][1].detail.find("received from rank 1 on node0"), std::string::npos) << got[2][1].detail;
    }
  }
}

// Per NIC, the all-reduce's threshold counts the NICs the node with the fewest processes drives.
TEST(AcceptFleet, APerNicThresholdCountsTheNicsTheFewestProcessesOfANodeDrive) {
  struct Case {
    std::vector<std::string> nodes;
    int nics;
    double nics_used;
  };
  for (const Case& k : {Case{{"a", "a", "b", "b"}, 8, 2}, Case{{"a", "a", "b", "b"}, 1, 1},
                        Case{{"a", "a", "a", "b"}, 8, 1}}) {
    AcceptProfile p = one_mib_profile();
    p.node_nics = k.nics;
    p.min_internode_allreduce_busbw_gbs_per_nic = {1e-6, "test per NIC"};
    std::vector<std::vector<Check>> got(4);
    run_local_ranks(4, [&](int rank, Communicator& comm) { got[rank] = internode_checks(comm, k.nodes[rank], p, 1); });
    for (int r = 0; r < 4; ++r) {
      const Check& c = got[r][0];
      EXPECT_DOUBLE_EQ(c.threshold, 1e-6 * k.nics_used) << c.source;
      EXPECT_TRUE(c.pass) << c.detail;
      EXPECT_NE(c.source.find(fmt::format("x {} NIC(s)", k.nics_used)), std::string::npos) << c.source;
      EXPECT_NE(c.source.find("test per NIC"), std::string::npos) << c.source;
    }
  }
}

TEST(AcceptFleet, EveryProcessKnowsItsPlaceOnItsNode) {
  std::vector<FleetPlace> got(5);
  run_local_ranks(5, [&](int rank, Communicator& comm) {
    got[rank] = fleet_place(comm, rank == 2 || rank == 4 ? "b" : "a");  // a a b a b
  });
  const std::vector<std::pair<int, int>> want = {{0, 3}, {1, 3}, {0, 2}, {2, 3}, {1, 2}};
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(got[r].local, want[r].first) << "rank " << r;
    EXPECT_EQ(got[r].per_node, want[r].second) << "rank " << r;
  }
}

#ifdef PTDP_HAVE_NCCL
#define PTDP_NEED_FOUR_GPUS()                                                    \
  do {                                                                           \
    std::string why_;                                                            \
    if (cuda::device_count(&why_) < 4) GTEST_SKIP() << "needs 4 GPUs: " << why_; \
  } while (0)

// A GPU fleet measures between GPUs: an NCCL world over the launcher's processes (here thread
// ranks, each on its own GPU of the vgpu build or of the machine), buffers in device memory.
TEST(AcceptFleet, GpuFleetsMeasureBetweenGpusOverNccl) {
  PTDP_NEED_FOUR_GPUS();
  const AcceptProfile p = one_mib_profile();
  std::vector<std::vector<Check>> got(4);
  run_local_ranks(4, [&](int rank, Communicator& comm) {
    got[rank] = gpu_internode_checks(comm, "node" + std::to_string(rank / 2), p, 2, rank);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(got[r].size(), 2u);
    for (const Check& c : got[r]) {
      EXPECT_TRUE(c.pass) << c.detail;
      EXPECT_FALSE(c.skipped) << c.detail;
      EXPECT_GT(c.value, 0) << c.detail;
      EXPECT_EQ(c.detail.rfind("nccl comm between GPUs (NCCL ", 0), 0u) << c.detail;
      EXPECT_NE(c.detail.find("this process's GPU " + std::to_string(r)), std::string::npos) << c.detail;
      EXPECT_NE(c.detail.find(" 0 wrong elements"), std::string::npos) << c.detail;
    }
  }
}

// The data checks see what the GPUs received: a communicator that corrupts what rank 2 receives
// (after the transfer, in device memory) fails rank 2's all-reduce and the sends of ranks 0 and 1,
// which go to rank 2 (the next process on another node); rank 2's own send and rank 3 pass.
class CorruptingComm : public Communicator {
 public:
  CorruptingComm(Communicator& c, Backend& be, bool corrupt) : c_(c), be_(be), corrupt_(corrupt) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  std::string backend() const override { return c_.backend(); }
  void all_reduce(Tensor& x, ReduceOp op) override { c_.all_reduce(x, op), spoil(x); }
  void all_gather(const Tensor& in, Tensor& out) override { c_.all_gather(in, out); }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override { c_.reduce_scatter(in, out, op); }
  void broadcast(Tensor& x, int root) override { c_.broadcast(x, root); }
  void send(const Tensor& x, int peer, int tag) override { c_.send(x, peer, tag); }
  void recv(Tensor& x, int peer, int tag) override { c_.recv(x, peer, tag), spoil(x); }
  void barrier() override { c_.barrier(); }
  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override { return c_.all_reduce_async(x, op); }
  CommHandle isend(const Tensor& x, int peer, int tag) override { return c_.isend(x, peer, tag); }
  CommHandle irecv(Tensor& x, int peer, int tag) override { return c_.irecv(x, peer, tag); }
  std::unique_ptr<Communicator> split(int color, int key) override { return c_.split(color, key); }
  void abort(const std::string& why) override { c_.abort(why); }

 private:
  void spoil(Tensor& x) {
    if (!corrupt_) return;
    Tensor tail = x.slice_rows(x.numel() - 3, x.numel());  // the last 3 elements
    be_.fill(tail, 12345.0);
    be_.synchronize();
  }
  Communicator& c_;
  Backend& be_;
  bool corrupt_;
};

TEST(AcceptFleet, WrongElementsReceivedOnAGpuFailItsChecks) {
  PTDP_NEED_FOUR_GPUS();
  const AcceptProfile p = one_mib_profile();
  std::vector<std::vector<Check>> got(4);
  run_local_ranks(4, [&](int rank, Communicator& comm) {
    auto be = make_cuda_backend(rank);
    auto nccl = make_nccl_world(comm, rank, std::chrono::seconds(30), be.get());
    CorruptingComm data(*nccl, *be, rank == 2);
    got[rank] = internode_checks(comm, "node" + std::to_string(rank / 2), p, 2, data, *be, "GPUs");
  });
  const std::vector<std::vector<bool>> pass = {{true, false}, {true, false}, {false, true}, {true, true}};
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(got[r].size(), 2u);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(got[r][i].pass, pass[r][i]) << "rank " << r << ": " << got[r][i].detail;
  }
  EXPECT_NE(got[2][0].detail.find(" 3 wrong elements on this process"), std::string::npos) << got[2][0].detail;
  for (int r : {0, 1})
    EXPECT_NE(got[r][1].detail.find("sent to rank 2 on node1"), std::string::npos) << got[r][1].detail;
  EXPECT_NE(got[0][1].detail.find(", 3 wrong elements)"), std::string::npos) << got[0][1].detail;
}
#endif

}  // namespace
}  // namespace ptdp
