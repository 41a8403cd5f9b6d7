// NCCL 2.8's NIC choice on a DGX A100 (Network::allreduce_nccl28, SoftwareStack::
// nccl_first_nic_per_switch): data-parallel groups whose GPUs share a PCIe switch share its first
// NIC, so with t >= 2 every group gets half of the NICs it uses and the second NIC of each switch
// idles; later NCCL (the other stacks) gives each GPU its own NIC.
#include "core/sim/network.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/sim/cost_model.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

// The group of each of a node's 8 GPUs when tensor-parallel groups of t are innermost.
std::vector<int> groups_for(int t) {
  std::vector<int> g(8);
  for (int l = 0; l < 8; ++l) g[size_t(l)] = l % t;
  return g;
}

// Bus bandwidth of the ring the model times, bytes/s, from its time for 1 GB (latency removed).
double busbw(const Network& net, int n, int t) {
  const double big = 1e12, small = 1e11;  // two sizes: the difference drops the latency
  const double dt = net.allreduce_nccl28(big, n, groups_for(t), 0) - net.allreduce_nccl28(small, n, groups_for(t), 0);
  return 2.0 * (n - 1) / n * (big - small) / dt;
}

// gpt-1.7b in fp16 with t x d GPUs (p = 1, b = 1, B = 64) under the SC'21 code (NCCL 2.8).
RunConfig gpt_under_nccl28(int tp, int dp) {
  RunConfig c;
  c.model = preset_config("gpt-1.7b");
  c.par.tp = tp, c.par.pp = 1, c.par.dp = dp, c.par.micro_batch = 1, c.par.global_batch = 64;
  c.precision = Precision::F16;
  c.stack = StackKind::Megatron2021;
  return c;
}

TEST(NetworkNccl28, GroupsSharingAPcieSwitchShareItsFirstNic) {
  const HardwareProfile& hw = selene();
  ASSERT_EQ(hw.pcie_switches, 4);
  const Network net(hw);
  const double nic = hw.nic_bw * hw.network_efficiency;  // 21.25 GB/s
  // t = 1: one group of 8 GPUs uses both NICs of every switch, alone.
  EXPECT_NEAR(busbw(net, 64, 1), 8 * nic, 1e-6 * nic);
  // t = 2: {0,2,4,6} and {1,3,5,7} both use mlx5_0, 2, 6, 8: 4 NICs at half their rate.
  EXPECT_NEAR(busbw(net, 32, 2), 4 * nic / 2, 1e-6 * nic);
  // t = 4: {0,4} and {1,5} both use the first NIC of switches 0 and 2.
  EXPECT_NEAR(busbw(net, 16, 4), 2 * nic / 2, 1e-6 * nic);
  // t = 8: GPUs 0 and 1 (own groups) both use mlx5_0.
  EXPECT_NEAR(busbw(net, 8, 8), nic / 2, 1e-6 * nic);
  // One node: NVLink only, as the plain all-reduce.
  EXPECT_DOUBLE_EQ(net.allreduce_nccl28(1e9, 8, groups_for(1), 0), net.allreduce(1e9, 8, 8));
}

// The stack decides: the SC'21 code (NCCL 2.8) pays for the shared NICs, the 2022 code does not
// (a byte of gradient takes half as long) but reduces fp32 gradients, twice the bytes.
TEST(NetworkNccl28, TheDataParallelAllReduceOfThe2021StackIsTwiceAsLongAtTEqual8) {
  RunConfig c = gpt_under_nccl28(8, 8);
  const CostModel old_code(c, selene());
  c.stack = StackKind::Megatron2022;
  const CostModel new_code(c, selene());
  const double params = 2e8;
  EXPECT_EQ(old_code.grad_bytes, 2);
  EXPECT_EQ(new_code.grad_bytes, 4);
  EXPECT_NEAR(old_code.dp_allreduce(params) / new_code.dp_allreduce(params / 2), 2.0, 0.05);  // the same bytes
  EXPECT_NEAR(old_code.dp_allreduce(params) / new_code.dp_allreduce(params), 1.0, 0.03);
}

// NCCL's model of a ring (tuning.cc): of an all-reduce's 2(n-1) steps only the 2(nodes-1) that
// leave a node pay the network's latency; the others are NVLink hops.
TEST(NetworkLatency, OnlyTheRingStepsThatLeaveANodePayTheNetworksLatency) {
  const HardwareProfile& hw = selene();
  const Network net(hw);
  const double lat_nvl = hw.nvlink_latency_s, lat_net = hw.network_latency_s;
  ASSERT_GT(lat_net, lat_nvl);
  // 1 byte: the bandwidth terms vanish beside the latency.
  EXPECT_NEAR(net.allreduce(1, 8, 8), 14 * lat_nvl, 1e-9);
  EXPECT_NEAR(net.allreduce(1, 16, 8), 28 * lat_nvl + 2 * lat_net, 1e-9);
  EXPECT_NEAR(net.allreduce(1, 32, 8), 56 * lat_nvl + 6 * lat_net, 1e-9);
  EXPECT_NEAR(net.allreduce(1, 8, 1), 14 * lat_net, 1e-9);  // one rank per node: every step leaves it
  EXPECT_NEAR(net.allgather(1, 32, 8), 28 * lat_nvl + 3 * lat_net, 1e-9);  // n-1 steps, nodes-1 across
  EXPECT_NEAR(net.allreduce_nccl28(1, 32, groups_for(1), 0), 56 * lat_nvl + 6 * lat_net, 1e-9);
}

// Under NCCL 2.8 a tensor-parallel group wider than a node is the same flat ring as a data-parallel
// group of whole nodes: every channel through one of the node's 8 NICs, the ring's full traffic
// through each (2(n-1)/n * bytes at 8 NICs' rate), not a hierarchical all-reduce.
TEST(NetworkNccl28, ATensorParallelGroupAcrossNodesIsAFlatRingOverTheNodesNics) {
  RunConfig c = gpt_under_nccl28(32, 2);
  const CostModel old_code(c, selene());
  ASSERT_TRUE(old_code.shared_nics());
  const double ring = old_code.net.allreduce_nccl28(old_code.act_bytes, 32, groups_for(1), 0);
  EXPECT_NEAR(old_code.layer.forward.tp_comm, 2 * ring, 1e-12);  // attention's and the MLP's all-reduce
  c.stack = StackKind::Megatron2022;
  const CostModel new_code(c, selene());
  EXPECT_NEAR(new_code.layer.forward.tp_comm, 2 * new_code.net.allreduce(new_code.act_bytes, 32, 8), 1e-12);
  EXPECT_GT(old_code.layer.forward.tp_comm, new_code.layer.forward.tp_comm);
}

}  // namespace
}  // namespace ptdp::sim
