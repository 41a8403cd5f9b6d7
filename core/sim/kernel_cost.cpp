#include <algorithm>

#include "core/sim/kernels.h"

namespace ptdp::sim {

double gemm_time(const HardwareProfile& hw, double peak, int elem, double m, double n, double k, double batch) {
  const double flops = 2.0 * m * n * k * batch;
  const double compute = flops / (peak * hw.gemm.efficiency(m, n, k, batch));
  const double traffic = double(elem) * (m * k + k * n + m * n) * batch;
  const double memory = traffic / (hw.memory_bw * hw.membound_efficiency);
  return std::max(compute, memory) + hw.launch_overhead_s;
}

namespace {

double collective_time(const Kernel& x, const KernelCosting& c) {
  const bool context = x.group == Group::Context;
  const int t = context ? c.cp : c.t;
  const int per_node = context ? c.cp_per_node : c.per_node;
  switch (x.collective) {
    case Collective::SendRecv: return t > 1 ? c.net.p2p(x.bytes, per_node < t) : 0.0;
    case Collective::AllToAll: return c.net.alltoall(x.bytes, t, per_node);
    case Collective::AllReduce:
      // A group of whole nodes under NCCL 2.8 (CostModel::shared_nics): a flat ring whose channels
      // leave through the NICs of the node's GPUs, all of them one group's (network.h).
      if (!context && c.shared_nics && c.per_node == c.hw.gpus_per_node && c.per_node < t)
        return c.net.allreduce_nccl28(x.bytes, t, std::vector<int>(size_t(c.hw.gpus_per_node), 0), 0);
      return c.net.allreduce(x.bytes, t, per_node);
    case Collective::AllGather: return c.net.allgather(x.bytes, t, per_node);
    case Collective::ReduceScatter: return c.net.reduce_scatter(x.bytes, t, per_node);
  }
  return 0;
}

}  // namespace

double kernel_time(const Kernel& x, const KernelList& list, const KernelCosting& c) {
  switch (x.kind) {
    case KernelKind::Gemm:
      // FP8: the profile's FP8 peak times the same efficiency curve as 16-bit GEMMs (an assumption:
      // docs/SIMULATOR.md, "FP8"), 1-byte operands.
      if (x.fp8) return gemm_time(c.hw, c.fp8_peak, 1, x.m, x.n, x.k, x.batch);
      return gemm_time(c.hw, c.peak, c.elem, x.m, x.n, x.k, x.batch);
    case KernelKind::Attention: return gemm_time(c.hw, c.peak, c.elem, x.m, x.n, x.k, x.batch);
    case KernelKind::Membound:
      return (x.bytes / (c.hw.memory_bw * c.hw.membound_efficiency) + x.calls * c.hw.launch_overhead_s) * x.part /
             x.whole;
    case KernelKind::TpComm: break;
  }
  double g = 0;
  for (int i = x.gemm; i >= 0 && i < x.gemm + x.span; ++i) g += kernel_time(list[size_t(i)], list, c);
  const double slowed = g * c.sm_margin;
  if (x.overlap == Overlap::SmMargin) return std::max(0.0, slowed - g);
  const double time = collective_time(x, c);
  switch (x.overlap) {
    case Overlap::None: return time;
    case Overlap::BesideGemm: return std::max(time - g, time * c.nccl_sm_share);
    case Overlap::RingExchange: return std::max(0.0, time - g * (c.t - 1) / c.t);
    case Overlap::SmBulk: return std::max(0.0, time - slowed);
    case Overlap::SmPipeline: return time / 4 + 3 * std::max(0.0, time - slowed) / 4;
    case Overlap::UnderKernels: return std::max(0.0, time - g);
    case Overlap::SmMargin: break;
  }
  return time;
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Recompute: return "recompute";
    case Phase::Backward: return "backward";
  }
  return "?";
}

const char* kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Gemm: return "GEMM";
    case KernelKind::Attention: return "attention";
    case KernelKind::Membound: return "memory-bound";
    case KernelKind::TpComm: return "TP communication";
  }
  return "?";
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all-reduce";
    case Collective::AllGather: return "all-gather";
    case Collective::ReduceScatter: return "reduce-scatter";
    case Collective::SendRecv: return "send-recv";
    case Collective::AllToAll: return "all-to-all";
  }
  return "?";
}

const char* overlap_name(Overlap o) {
  switch (o) {
    case Overlap::None: return "";
    case Overlap::BesideGemm: return "beside the GEMM on NCCL's SMs";
    case Overlap::RingExchange: return "ring exchange under the GEMM";
    case Overlap::SmBulk: return "bulk on 16 SMs under the GEMM";
    case Overlap::SmPipeline: return "pipelined on 16 SMs with the GEMM";
    case Overlap::SmMargin: return "the GEMM on SMs - 16";
    case Overlap::UnderKernels: return "under the block's attention";
  }
  return "?";
}

}  // namespace ptdp::sim
