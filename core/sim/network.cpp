#include "core/sim/network.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/common/error.h"

namespace ptdp::sim {

double Network::nic_bw_per_device() const {
  const double nics_per_device = double(hw_.nics_per_node) / hw_.gpus_per_node;
  return hw_.nic_bw * hw_.network_efficiency * std::min(1.0, nics_per_device);
}

// An all-reduce ring's latency: 2(n-1) steps, of which the 2(nodes-1) that cross a node boundary
// pay the network's latency and the others NVLink's (NCCL's own model of a ring, tuning.cc
// ncclTopoTuneModel: (nsteps - nInterSteps) * intraLat + nInterSteps * interLat).
double Network::latency(int n, int nodes) const {
  const int steps = 2 * (std::max(2, n) - 1), inter = 2 * (std::max(1, nodes) - 1);
  return (steps - inter) * hw_.nvlink_latency_s + inter * hw_.network_latency_s;
}

double Network::allreduce(double bytes, int n, int per_node) const {
  if (n <= 1 || bytes <= 0) return 0;
  const int k = std::clamp(per_node, 1, n);
  const int nodes = (n + k - 1) / k;
  if (nodes == 1) return 2.0 * (n - 1) / n * bytes / hw_.nvlink_busbw + latency(n, 1);
  const double intra = k > 1 ? 2.0 * (k - 1) / k * bytes / hw_.nvlink_busbw : 0.0;
  const double inter = 2.0 * (nodes - 1) / nodes * (bytes / k) / nic_bw_per_device();
  return std::max(intra, inter) + latency(n, nodes);
}

double Network::nccl28_inter_bw(const std::vector<int>& group_of, int group, int* members) const {
  const int gpus = hw_.gpus_per_node, switches = hw_.pcie_switches;
  PTDP_CHECK(switches > 0 && int(group_of.size()) == gpus, "profile {} gives no PCIe switches", hw_.name);
  const int per_switch = gpus / switches, nics_per_switch = hw_.nics_per_node / switches;
  // count[s][g]: GPUs of group g on switch s.
  std::map<int, std::map<int, int>> count;
  *members = 0;
  for (int l = 0; l < gpus; ++l)
    if (group_of[size_t(l)] >= 0) {
      ++count[l / per_switch][group_of[size_t(l)]];
      *members += group_of[size_t(l)] == group;
    }
  // NIC j of switch s carries a channel of every group with more than j GPUs on s.
  int channels = 0, most_sharers = 1;
  for (const auto& [sw, groups] : count) {
    const auto mine = groups.find(group);
    if (mine == groups.end()) continue;
    for (int j = 0; j < std::min(mine->second, nics_per_switch); ++j) {
      int sharers = 0;
      for (const auto& [g, c] : groups) sharers += c > j;
      ++channels;
      most_sharers = std::max(most_sharers, sharers);
    }
  }
  return channels * hw_.nic_bw * hw_.network_efficiency / most_sharers;
}

double Network::allreduce_nccl28(double bytes, int n, const std::vector<int>& group_of, int group) const {
  int k = 0;
  const double inter_bw = nccl28_inter_bw(group_of, group, &k);
  if (n <= 1 || bytes <= 0 || k == 0) return 0;
  if (k >= n) return allreduce(bytes, n, k);  // one node: NVLink only
  const double ring = 2.0 * (n - 1) / n * bytes;
  return std::max(ring / inter_bw, ring / hw_.nvlink_busbw) + latency(n, (n + k - 1) / k);
}

double Network::allgather_nccl28(double bytes, int n, const std::vector<int>& group_of, int group) const {
  int k = 0;
  const double inter_bw = nccl28_inter_bw(group_of, group, &k);
  if (n <= 1 || bytes <= 0 || k == 0) return 0;
  if (k >= n) return allgather(bytes, n, k);
  const double ring = double(n - 1) / n * bytes;
  return std::max(ring / inter_bw, ring / hw_.nvlink_busbw) + latency(n, (n + k - 1) / k) / 2;
}

double Network::allgather(double bytes, int n, int per_node) const {
  if (n <= 1 || bytes <= 0) return 0;
  const int k = std::clamp(per_node, 1, n);
  const int nodes = (n + k - 1) / k;
  if (nodes == 1) return double(n - 1) / n * bytes / hw_.nvlink_busbw + latency(n, 1) / 2;
  const double intra = k > 1 ? double(k - 1) / k * bytes / hw_.nvlink_busbw : 0.0;
  const double inter = double(nodes - 1) / nodes * (bytes / k) / nic_bw_per_device();
  return std::max(intra, inter) + latency(n, nodes) / 2;
}

double Network::alltoall(double bytes, int n, int per_node) const {
  if (n <= 1 || bytes <= 0) return 0;
  const int k = std::clamp(per_node, 1, n);
  const int nodes = (n + k - 1) / k;
  const double intra = double(k - 1) / n * bytes / hw_.nvlink_busbw;
  const double inter = nodes > 1 ? double(n - k) / n * bytes / nic_bw_per_device() : 0.0;
  return std::max(intra, inter) + latency(n, nodes) / 2;
}

double Network::sharded_collective(double bytes, int n, int per_node, bool flat) const {
  if (n <= 1 || bytes <= 0) return 0;
  const int k = std::clamp(per_node, 1, n);
  const int nodes = (n + k - 1) / k;
  if (nodes == 1) return allgather(bytes, n, per_node);
  // Latency: one network step per node boundary of the ring; the NVLink hops inside a node are
  // not charged (a per-rank step latency would make a 1536-rank gather cost several ms more than a
  // 768-rank one, which the paper's ZeRO-3 rows rule out: docs/SIMULATOR.md).
  const double latency = double(nodes - 1) * hw_.network_latency_s;
  if (flat) return double(n - 1) / n * bytes / nic_bw_per_device() + latency;
  const double intra = k > 1 ? double(k - 1) / k * bytes / hw_.nvlink_busbw : 0.0;
  const double inter = double(nodes - 1) / nodes * (bytes / k) / nic_bw_per_device();
  return std::max(intra, inter) + latency;
}

double Network::p2p(double bytes, bool cross_node) const {
  if (bytes <= 0) return 0;
  if (cross_node) return bytes / nic_bw_per_device() + hw_.network_latency_s;
  return bytes / hw_.nvlink_p2p_bw + hw_.nvlink_latency_s;
}

}  // namespace ptdp::sim
