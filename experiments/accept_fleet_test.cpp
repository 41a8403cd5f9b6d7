// The fleet's verdict (judge_fleet), its gathering over a communicator and the inter-node checks,
// with ranks as threads (local comm). The same through mpirun over 4 simulated nodes, one slowed:
// testing/accept_fleet.sh (CliMpi.AcceptFleetNamesTheSlowNode).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "core/comm/local/local_comm.h"
#include "experiments/accept_fleet.h"

namespace ptdp {
namespace {

Check fleet_rate(const std::string& metric, double v, bool pass = true) {
  return Check{metric, metric, "GB/s", ">=", v, 1.0, pass, "", "test"};
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
  AcceptProfile p;
  p.path = "test.toml";
  p.internode_mib = 1;
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

}  // namespace
}  // namespace ptdp
