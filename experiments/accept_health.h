// The health pre-flight of `ptdp accept` (`--level 1` alone; first at `--level 2`): what the
// driver reports about each GPU, read through NVML (the driver's libnvidia-ml.so.1, opened at run
// time; PTDP_NVML_LIBRARY names another file), judged in seconds, before any benchmark, so that a
// FAIL later is explained: other processes on the GPU, uncorrectable ECC errors, row remapping
// pending or failed, a PCIe link narrower than the card's, clocks held down by the hardware; and
// the host's CPU load (other work competing with the benchmarks' launch, NCCL and loader threads).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/accept_check.h"

namespace ptdp {

// One GPU as NVML reports it; -1 where NVML could not say (not supported on this GPU).
struct GpuHealth {
  int index = 0;
  std::string name;
  int compute_processes = -1;            // processes with a compute context on the GPU
  int persistence = -1;                  // 1 on, 0 off
  int64_t ecc_uncorrected = -1;          // volatile (since the driver loaded) uncorrectable ECC errors
  int64_t remapped_uncorrectable = -1;   // rows remapped after uncorrectable errors (over the card's life)
  int remap_pending = -1, remap_failed = -1;
  int pcie_width = -1, pcie_max_width = -1, pcie_gen = -1, pcie_max_gen = -1;
  int64_t clock_events = -1;             // nvmlClocksEventReasons bits
  // The sensors, as the burn-in reads them under load.
  double power_w = -1;                   // board power draw
  int temperature_c = -1;                // the GPU die
  int sm_clock_mhz = -1;                 // the SMs' current clock
};

// The bits of nvmlClocksEventReasons `events` that mean the hardware or the driver holds the
// clocks down (HW slowdown, SW thermal, HW thermal, HW power brake; not idle, application clocks
// or the power cap); 0 when unknown (negative). And the names of any bits ("none" for none).
int64_t clock_faults(int64_t events);
std::string clock_event_names(int64_t bits);

// Every GPU through NVML; empty with `why` set when the library cannot be opened or read.
std::vector<GpuHealth> read_gpu_health(std::string* why);

// What NVML names, e.g. "8 x NVIDIA H100 80GB HBM3" ("no GPU" when empty).
std::string health_description(const std::vector<GpuHealth>& gpus);

// One check per GPU (name "health", metric "gpuN"): the number of problems found, at most 0;
// the detail names each problem first, then everything read. No GPU: one SKIP with `why`.
std::vector<Check> health_checks(const std::vector<GpuHealth>& gpus, const std::string& why);

// The host's load: the 1-minute load average (runnable and uninterruptible tasks, proc(5)) of
// /proc/loadavg, or of PTDP_LOADAVG's text in that format (tests), and the online CPUs.
struct HostLoad {
  double load1 = -1;  // -1: not readable (`why` says why)
  int cpus = 0;
  std::string why;
};
HostLoad read_host_load();

// One check (name "health", metric "host_load"): the load per CPU, at most `max_per_cpu`
// (accept.health.max_load_per_cpu); SKIP when the load could not be read.
Check host_load_check(const HostLoad& load, const Threshold& max_per_cpu);

}  // namespace ptdp
