// Hardware profiles (hardware/*.toml): what the performance model knows of a machine — peak
// FLOP/s, GEMM and memory-bound efficiency, memory, NVLink and network — each number with its source.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config/settings.h"

namespace ptdp::sim {

// Achieved fraction of peak of a GEMM C[m,n] = A[m,k] B[k,n] (batch of them):
//   max_efficiency * W / (W + mn_half) * k / (k + k_half),  W = m * n * batch output elements.
// The first factor is tile and wave quantisation (few output tiles leave SMs idle), the second
// the fixed cost of short reductions (prologue, epilogue, low reuse).
struct GemmCurve {
  double max_efficiency = 0, mn_half = 0, k_half = 0;
  double efficiency(double m, double n, double k, double batch = 1) const {
    const double w = m * n * batch;
    return max_efficiency * w / (w + mn_half) * k / (k + k_half);
  }
};

// A measured GEMM (provenance of the curve; scripts/calibrate.py fits the curve to these).
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0;
  double tflops = 0;
};

struct HardwareProfile {
  std::string name;    // e.g. a100-selene
  std::string device;  // e.g. NVIDIA A100-SXM4-80GB
  std::string kind;    // gpu | cpu
  std::string path;    // the file it was read from
  // A measured CPU profile: the CPU it was measured on, as /proc/cpuinfo names it (cpu_model;
  // optional, empty when not given).
  std::string cpu_model;
  Precision default_precision = Precision::F16;  // f16 on GPUs, f32 on the CPU

  int gpus_per_node = 1;
  // PCIe switches per node, each holding gpus_per_node / pcie_switches GPUs and nics_per_node /
  // pcie_switches NICs, in order (0: not given; only NCCL 2.8's NIC choice needs it, Network).
  int pcie_switches = 0;
  // Dense peak per precision, FLOP/s (0: the precision is not available).
  double peak_f16 = 0, peak_bf16 = 0, peak_f32 = 0;
  // Dense FP8 tensor-core peak, FLOP/s (compute.peak_tflops_fp8, optional; 0: no FP8, Hopper on).
  double peak_fp8 = 0;
  GemmCurve gemm;
  std::vector<GemmPoint> gemm_points;
  double launch_overhead_s = 0;      // per kernel
  int sms = 0;                       // streaming multiprocessors per GPU (0: not given, e.g. a CPU)

  double memory_bytes = 0;           // capacity per device
  double memory_bw = 0;              // bytes/s (HBM or DRAM)
  double membound_efficiency = 0;    // achieved fraction of memory_bw by element-wise kernels
  double reserved_bytes = 0;         // CUDA context, communicator buffers, library workspaces
  double allocator_overhead = 1;     // factor on activation memory (caching-allocator fragmentation)

  double nvlink_p2p_bw = 0;          // bytes/s, one direction, per device, inside a node
  double nvlink_busbw = 0;           // bytes/s, collective bus bandwidth inside a node
  double nvlink_latency_s = 0;
  // NCCL's channels for a collective inside a node: one CUDA block each, on an SM of its own for
  // the collective's whole time (0: not given; an overlapped collective then takes no SMs).
  int nccl_channels = 0;
  double nic_bw = 0;                 // bytes/s per NIC, one direction
  int nics_per_node = 1;
  double network_efficiency = 0;     // achieved fraction of nic_bw
  double network_latency_s = 0;

  std::map<std::string, std::string> sources;  // field -> where the number comes from

  // Peak FLOP/s for a --precision (f16 | bf16 | f32); 0 if the profile has none.
  double peak(Precision precision) const;
  // Bytes per element of activations and weights in that precision.
  static int element_bytes(Precision precision);
};

// Counts of a profile are whole numbers from 1 to these.
inline constexpr int64_t kMaxPerNode = 1 << 20;           // node.gpus, network.nics_per_node
inline constexpr int64_t kMaxGemmDim = int64_t(1) << 53;  // gemm.points[].m, n, k: exact in a double

// The bounds of a profile's numbers, in the file's units: wide enough for any machine (a CPU core
// to an exaflop device, a kilobyte per second to a petabyte per second), narrow enough that every
// time and rate the simulator computes from them stays finite for every model and batch it
// accepts (at most ~1e26 FLOPs and bytes per iteration over at most 1e-30 of the slowest rate
// is ~1e56 s). A peak of 0 (the precision is absent) and a latency or overhead of 0 stay allowed.
struct ProfileBounds {
  double least_tflops = 1e-6, most_tflops = 1e6;   // compute.peak_tflops_*
  double least_gbs = 1e-6, most_gbs = 1e6;         // memory.bandwidth_gbs, nvlink.*_gbs, network.nic_bandwidth_gbs
  double least_gb = 1e-6, most_gb = 1e9;           // memory.capacity_gb, memory.reserved_gb
  double least_fraction = 1e-3;                    // gemm.max_efficiency, *.membound_efficiency, network.efficiency
  double most_us = 1e9;                            // compute.launch_overhead_us, *.latency_us (1000 s)
  double most_mn_half = 1e15, most_k_half = 1e12;  // gemm.mn_half, gemm.k_half
  double most_allocator_overhead = 1e3;            // memory.allocator_overhead
};
inline constexpr ProfileBounds kProfileBounds{};

// Reads a profile: `name_or_path` is a file (contains '/' or ends in .toml) or a name looked up
// in the hardware folders (hardware_dirs()). UsageError naming the file and the field for a
// missing, non-numeric or out-of-range value (numbers must be positive, counts whole numbers),
// or an unknown name; text quoted from the file has its control characters escaped (one line).
HardwareProfile load_profile(const std::string& name_or_path);
// Parses profile text; `path` only names the file in errors.
HardwareProfile parse_profile(const std::string& text, const std::string& path);
// A warning when a CPU profile measured on `cpu_model` is used on another CPU (`this_cpu`, as
// /proc/cpuinfo names it); empty otherwise.
std::string other_cpu_warning(const HardwareProfile& hw, const std::string& this_cpu);
// Where profiles are looked up: $PTDP_HARDWARE_DIR, ./hardware, the source tree's hardware/.
std::vector<std::string> hardware_dirs();
// The names of the profiles found there (NAME-accept.toml files, ptdp accept's, left out).
std::vector<std::string> profile_names();

}  // namespace ptdp::sim
