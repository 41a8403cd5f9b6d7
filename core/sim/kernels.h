// The cost model's work as data: every kernel and collective that one micro-batch runs on one
// device through a transformer layer, the embedding and the output layer, pass by pass, in order.
// Small functions build the list, one a concern (layer_kernels.cpp: Megatron's; ptdp_kernels.cpp:
// ptdp's own CUDA backend's; edge_kernels.cpp), so that a software stack's feature changes the
// list; one function (kernel_time) costs any item of it. `ptdp simulate --explain` prints it.
#pragma once
#include <vector>

#include "core/sim/hardware.h"
#include "core/sim/network.h"

namespace ptdp::sim {

enum class Phase { Forward, Recompute, Backward };
enum class KernelKind { Gemm, Attention, Membound, TpComm };  // PassCost's four columns
// SendRecv: every rank of the group sends one block to the next rank of its ring and receives one
// from the previous (context parallelism's p2p ring); AllToAll: each rank's buffer split into n
// parts, part j to rank j (the a2a variant's heads-for-sequence exchange).
enum class Collective { AllReduce, AllGather, ReduceScatter, SendRecv, AllToAll };
// The group a collective runs over: the tensor-parallel group, or the context-parallel group
// (Megatron-core's rank order puts it between tensor and data: its ranks t apart).
enum class Group { Tensor, Context };
enum class Where { Layer, Embedding, Head };

// How a tensor-parallel item shares time with the GEMM it names (Kernel::gemm); the mechanisms
// and their sources in docs/SIMULATOR.md, "What an overlap costs". c: the collective alone, g: the
// GEMM alone, slowed: g SMs / (SMs - 16).
enum class Overlap {
  None,          // alone: c
  BesideGemm,    // NCCL on a stream of its own beside a cuBLAS GEMM (megatron-2022): max(c - g, c channels / SMs)
  RingExchange,  // Transformer Engine's ring exchange on the copy engines: max(0, c - g (t - 1) / t)
  SmBulk,        // TE's bulk overlap on 16 SMs: max(0, c - slowed)
  SmPipeline,    // TE's reduce-scatter pipelined over 4 chunks of the GEMM: c/4 + 3 max(0, c - slowed) / 4
  SmMargin,      // no collective: the GEMM's own slowdown on SMs - 16 SMs, slowed - g
  UnderKernels,  // asynchronous beside the `span` kernels from Kernel::gemm on (the ring's block transfer
                 // under the block's attention): max(0, c - their time)
};

struct Kernel {
  const char* name = "";          // the GEMM's weight or the kernel: "qkv", "ln1", "softmax", ...
  const char* detail = nullptr;  // a GEMM's or collective's role: "dgrad", "wgrad", "sp", ...
  Phase phase = Phase::Forward;
  Where where = Where::Layer;
  KernelKind kind = KernelKind::Membound;
  int module = -1;   // a layer's: the LayerModule whose forward or backward runs it
  bool pre = false;  // runs before its module's weights are used (where ZeRO-3 waits for their gather)
  // Under --stack ptdp: the CUDA backend op (op_profile.h's name) that runs it; consecutive
  // kernels naming the same op are one call of it (a Membound kernel of `calls` > 1 adds the
  // others). Null: no backend op (a collective).
  const char* op = nullptr;
  double m = 0, n = 0, k = 0, batch = 1;  // Gemm, Attention: batch x (m x k) (k x n)
  double bytes = 0;                       // Membound: read and written; TpComm: the collective's result
  double part = 1, whole = 1;  // a Membound pass shared by a layer's modules: this module's part of `whole`
  int calls = 1;               // Membound: the op called this many times over `bytes` (each a launch)
  Collective collective = Collective::AllReduce;
  Overlap overlap = Overlap::None;
  int gemm = -1;  // index in the list of the GEMM an Overlap other than None runs beside
  int span = 1;   // UnderKernels: how many kernels from `gemm` on it runs under
  Group group = Group::Tensor;
  bool fp8 = false;  // Gemm: FP8 operands at the profile's FP8 peak (--fp8-format)
  double flops() const { return 2 * m * n * k * batch; }
};
using KernelList = std::vector<Kernel>;

// What costing a kernel needs: the profile, the run's precision and its tensor-parallel group.
struct KernelCosting {
  const HardwareProfile& hw;
  const Network& net;
  double peak = 0;       // FLOP/s in the run's precision
  int elem = 2;          // bytes per element
  int t = 1;             // tensor-parallel ranks
  int per_node = 1;      // of them in one node (the slowest group's)
  bool shared_nics = false;  // NCCL 2.8's NIC choice (CostModel::shared_nics)
  double sm_margin = 1;      // SMs / (SMs - 16): a GEMM beside TE's SM-based overlaps
  double nccl_sm_share = 0;  // NCCL's channels / SMs inside a node (megatron-2022's overlap)
  int cp = 1;                // context-parallel ranks
  int cp_per_node = 1;       // of them in one node (the slowest group's)
  double fp8_peak = 0;       // FLOP/s of FP8 GEMMs (--fp8-format; 0: none)
};

// Seconds the item adds to its pass: a GEMM's achieved time, a memory-bound kernel's traffic, a
// collective's exposed time (its Overlap with the GEMM it names).
double kernel_time(const Kernel& k, const KernelList& list, const KernelCosting& c);

// Achieved time of one GEMM (batch of m x n x k products) on the profile.
double gemm_time(const HardwareProfile& hw, double peak, int elem, double m, double n, double k, double batch = 1);

const char* phase_name(Phase p);         // "forward", "recompute", "backward"
const char* kind_name(KernelKind k);     // PassCost's columns as `ptdp simulate` prints them
const char* collective_name(Collective c);  // "all-reduce", "all-gather", "reduce-scatter", "send-recv", "all-to-all"
const char* overlap_name(Overlap o);     // "" for None

}  // namespace ptdp::sim
