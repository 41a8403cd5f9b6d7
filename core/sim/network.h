// Communication times on a profile's topology (nodes of gpus_per_node devices on NVLink/NVSwitch,
// one NIC per device across nodes): all-reduce, all-gather, point-to-point.
#pragma once
#include <vector>

#include "core/sim/hardware.h"

namespace ptdp::sim {

class Network {
 public:
  explicit Network(const HardwareProfile& hw) : hw_(hw) {}

  // Ring all-reduce of `bytes` over n ranks, `per_node` of them in each node. Within a node:
  // 2(n-1)/n * bytes over the NVLink bus bandwidth. Across nodes, hierarchical and pipelined:
  // reduce-scatter inside the node, all-reduce of bytes/per_node across nodes over each device's
  // own NIC, all-gather inside the node; the slower of the two parts sets the time.
  double allreduce(double bytes, int n, int per_node) const;
  // The same all-reduce as NCCL 2.8 runs it while every group of the node runs its own at once
  // (SoftwareStack::nccl_first_nic_per_switch): a flat ring over the n ranks, each channel through
  // one NIC, every group taking the first NIC of each PCIe switch holding one of its GPUs (the
  // first two of a switch where it has two GPUs there, ...). A NIC used by c groups gives each 1/c
  // of its rate, and the ring runs at the pace of its slowest channel. `group_of` gives the group of
  // each GPU of the node (-1: none), `group` the one timed. The profile's pcie_switches must be set.
  double allreduce_nccl28(double bytes, int n, const std::vector<int>& group_of, int group) const;
  // The all-gather (or reduce-scatter) of a `bytes` result run the same way.
  double allgather_nccl28(double bytes, int n, const std::vector<int>& group_of, int group) const;
  // All-gather of a `bytes` result (each rank holds bytes/n) over n ranks, per_node per node.
  double allgather(double bytes, int n, int per_node) const;
  // Reduce-scatter of a `bytes` input (each rank keeps bytes/n): the all-gather's traffic reversed.
  double reduce_scatter(double bytes, int n, int per_node) const { return allgather(bytes, n, per_node); }
  // All-gather (or reduce-scatter) of a `bytes` result over n ranks for ZeRO-3 (zero3.h), plus one
  // network latency per node boundary of the ring. flat: each rank's shard traffic crosses its own
  // NIC, (n-1)/n * bytes at one NIC's bandwidth (as DeepSpeed ran it for the paper); otherwise
  // node-aware like allgather(): a node's traffic spread over all its NICs.
  double sharded_collective(double bytes, int n, int per_node, bool flat) const;
  // All-to-all of a `bytes` buffer on each of n ranks, per_node per node: each rank keeps 1/n and
  // sends (n-1)/n of it, the part for ranks of its node over NVLink, the rest over its own NIC; the
  // slower of the two sets the time, plus an all-gather's latency.
  double alltoall(double bytes, int n, int per_node) const;
  // Sending `bytes` from one device to one device, inside a node or across nodes.
  double p2p(double bytes, bool cross_node) const;
  // Bandwidth one device gets across nodes, bytes/s.
  double nic_bw_per_device() const;

 private:
  // An all-reduce ring's latency over n ranks on `nodes` nodes (an all-gather's is half).
  double latency(int n, int nodes) const;
  // The inter-node bandwidth of `group`'s ring under NCCL 2.8's NIC choice; *members: its GPUs in the node.
  double nccl28_inter_bw(const std::vector<int>& group_of, int group, int* members) const;
  const HardwareProfile& hw_;
};

}  // namespace ptdp::sim
