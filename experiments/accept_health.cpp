#include "experiments/accept_health.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ptdp {
namespace {

// NVML's C interface, the calls used here (docs.nvidia.com/deploy/nvml-api): every call returns
// nvmlReturn_t, 0 on success; devices are opaque handles; enums are int-sized.
constexpr int kNvmlSuccess = 0, kNvmlInsufficientSize = 7;
constexpr int kNvmlUncorrected = 1, kNvmlVolatileCounter = 0;  // nvmlMemoryErrorType_t, nvmlEccCounterType_t
using NvmlDevice = void*;

constexpr int kNvmlTemperatureGpu = 0, kNvmlClockSm = 1;  // nvmlTemperatureSensors_t, nvmlClockType_t

// HW slowdown (power brake or thermal, 0x8), SW thermal (0x20), HW thermal (0x40), HW power brake (0x80).
constexpr int64_t kClockFaultEvents = 0x8 | 0x20 | 0x40 | 0x80;

class Nvml {
 public:
  explicit Nvml(std::string* why) {
    const char* env = std::getenv("PTDP_NVML_LIBRARY");
    const std::string lib = env && *env ? env : "libnvidia-ml.so.1";
    handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      *why = fmt::format("NVML not available ({}): no NVIDIA driver here", dlerror());
      return;
    }
    auto init = sym<int (*)()>("nvmlInit_v2");
    error_string_ = sym<const char* (*)(int)>("nvmlErrorString");
    if (!init) {
      *why = fmt::format("{} has no nvmlInit_v2", lib);
      return;
    }
    if (const int r = init(); r != kNvmlSuccess) {
      *why = fmt::format("nvmlInit failed: {}", error(r));
      return;
    }
    ok_ = true;
  }
  ~Nvml() {
    if (ok_)
      if (auto shutdown = sym<int (*)()>("nvmlShutdown")) shutdown();
    if (handle_) dlclose(handle_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ok() const { return ok_; }
  std::string error(int r) const { return error_string_ ? error_string_(r) : fmt::format("NVML error {}", r); }

  // The first of `names` that the library exports, cast to F; null if none.
  template <class F>
  F sym(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (void* p = dlsym(handle_, n)) return reinterpret_cast<F>(p);
    return nullptr;
  }
  template <class F>
  F sym(const char* name) const {
    return sym<F>({name});
  }

 private:
  void* handle_ = nullptr;
  bool ok_ = false;
  const char* (*error_string_)(int) = nullptr;
};

// f(device, unsigned*): the value, or -1.
int nvml_uint(const Nvml& nv, const char* name, NvmlDevice d) {
  auto f = nv.sym<int (*)(NvmlDevice, unsigned*)>(name);
  unsigned v = 0;
  return f && f(d, &v) == kNvmlSuccess ? int(v) : -1;
}

GpuHealth nvml_read_gpu(const Nvml& nv, unsigned i, NvmlDevice d) {
  GpuHealth g;
  g.index = int(i);
  char name[96] = {};
  if (auto f = nv.sym<int (*)(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName"); f && f(d, name, sizeof name) == 0)
    g.name = name;
  // With no buffer, the count alone: success when there are none, "insufficient size" otherwise.
  if (auto f = nv.sym<int (*)(NvmlDevice, unsigned*, void*)>({"nvmlDeviceGetComputeRunningProcesses_v3",
                                                          "nvmlDeviceGetComputeRunningProcesses_v2",
                                                          "nvmlDeviceGetComputeRunningProcesses"})) {
    unsigned n = 0;
    const int r = f(d, &n, nullptr);
    if (r == kNvmlSuccess || r == kNvmlInsufficientSize) g.compute_processes = int(n);
  }
  g.persistence = nvml_uint(nv, "nvmlDeviceGetPersistenceMode", d);
  if (auto f = nv.sym<int (*)(NvmlDevice, int, int, unsigned long long*)>("nvmlDeviceGetTotalEccErrors")) {
    unsigned long long n = 0;
    if (f(d, kNvmlUncorrected, kNvmlVolatileCounter, &n) == kNvmlSuccess) g.ecc_uncorrected = int64_t(n);
  }
  if (auto f = nv.sym<int (*)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*)>("nvmlDeviceGetRemappedRows")) {
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (f(d, &corrected, &uncorrected, &pending, &failed) == kNvmlSuccess) {
      g.remapped_uncorrectable = uncorrected;
      g.remap_pending = pending != 0;
      g.remap_failed = failed != 0;
    }
  }
  g.pcie_width = nvml_uint(nv, "nvmlDeviceGetCurrPcieLinkWidth", d);
  g.pcie_max_width = nvml_uint(nv, "nvmlDeviceGetMaxPcieLinkWidth", d);
  g.pcie_gen = nvml_uint(nv, "nvmlDeviceGetCurrPcieLinkGeneration", d);
  g.pcie_max_gen = nvml_uint(nv, "nvmlDeviceGetMaxPcieLinkGeneration", d);
  if (auto f = nv.sym<int (*)(NvmlDevice, unsigned long long*)>({"nvmlDeviceGetCurrentClocksEventReasons",
                                                            "nvmlDeviceGetCurrentClocksThrottleReasons"})) {
    unsigned long long bits = 0;
    if (f(d, &bits) == kNvmlSuccess) g.clock_events = int64_t(bits);
  }
  if (auto f = nv.sym<int (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerUsage")) {
    unsigned mw = 0;
    if (f(d, &mw) == kNvmlSuccess) g.power_w = mw / 1000.0;
  }
  if (auto f = nv.sym<int (*)(NvmlDevice, int, unsigned*)>("nvmlDeviceGetTemperature")) {
    unsigned c = 0;
    if (f(d, kNvmlTemperatureGpu, &c) == kNvmlSuccess) g.temperature_c = int(c);
  }
  if (auto f = nv.sym<int (*)(NvmlDevice, int, unsigned*)>("nvmlDeviceGetClockInfo")) {
    unsigned mhz = 0;
    if (f(d, kNvmlClockSm, &mhz) == kNvmlSuccess) g.sm_clock_mhz = int(mhz);
  }
  return g;
}

std::string or_unknown(int64_t v, const std::string& text) { return v < 0 ? "unknown" : text; }

}  // namespace

int64_t clock_faults(int64_t events) { return events > 0 ? events & kClockFaultEvents : 0; }

std::string clock_event_names(int64_t bits) {
  static const std::pair<int64_t, const char*> names[] = {
      {0x1, "idle"},          {0x2, "application clocks"}, {0x4, "SW power cap"}, {0x8, "HW slowdown"},
      {0x10, "sync boost"},   {0x20, "SW thermal"},        {0x40, "HW thermal"}, {0x80, "HW power brake"},
      {0x100, "display clocks"}};
  std::string s;
  for (const auto& [bit, name] : names)
    if (bits & bit) s += fmt::format("{}{}", s.empty() ? "" : ", ", name);
  return s.empty() ? "none" : s;
}

std::vector<GpuHealth> read_gpu_health(std::string* why) {
  Nvml nv(why);
  if (!nv.ok()) return {};
  auto count = nv.sym<int (*)(unsigned*)>({"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  auto handle = nv.sym<int (*)(unsigned, NvmlDevice*)>({"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  unsigned n = 0;
  if (!count || !handle) {
    *why = "NVML lacks nvmlDeviceGetCount or nvmlDeviceGetHandleByIndex";
    return {};
  }
  if (const int r = count(&n); r != kNvmlSuccess) {
    *why = fmt::format("nvmlDeviceGetCount failed: {}", nv.error(r));
    return {};
  }
  std::vector<GpuHealth> gpus;
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    if (const int r = handle(i, &d); r != kNvmlSuccess) {
      *why = fmt::format("nvmlDeviceGetHandleByIndex({}) failed: {}", i, nv.error(r));
      return {};
    }
    gpus.push_back(nvml_read_gpu(nv, i, d));
  }
  if (gpus.empty()) *why = "NVML sees no GPU";
  return gpus;
}

std::string health_description(const std::vector<GpuHealth>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size();) {
    size_t j = i;
    while (j < gpus.size() && gpus[j].name == gpus[i].name) ++j;
    out += fmt::format("{}{} x {}", out.empty() ? "" : ", ", j - i, gpus[i].name.empty() ? "GPU" : gpus[i].name);
    i = j;
  }
  return out.empty() ? "no GPU" : out;
}

std::vector<Check> health_checks(const std::vector<GpuHealth>& gpus, const std::string& why) {
  const Threshold none{0, "NVML; NVIDIA GPU Memory Error Management (a pending or failed row remap needs a GPU "
                          "reset or service); nvmlClocksEventReasons"};
  if (gpus.empty()) {
    Check c = skipped_check("health", "gpus", "problems", none, why);
    c.op = "<=";
    return {c};
  }
  std::vector<Check> checks;
  for (const GpuHealth& g : gpus) {
    std::vector<std::string> problems;
    if (g.compute_processes > 0)
      problems.push_back(fmt::format("{} other process(es) computing on it", g.compute_processes));
    if (g.ecc_uncorrected > 0) problems.push_back(fmt::format("{} uncorrectable ECC error(s)", g.ecc_uncorrected));
    if (g.remap_pending > 0) problems.push_back("a row remap pending (reset the GPU)");
    if (g.remap_failed > 0) problems.push_back("a row remap failed (the card needs service)");
    if (g.pcie_width > 0 && g.pcie_max_width > 0 && g.pcie_width < g.pcie_max_width)
      problems.push_back(fmt::format("PCIe link x{} of x{}", g.pcie_width, g.pcie_max_width));
    if (const int64_t held = clock_faults(g.clock_events))
      problems.push_back("clocks held down: " + clock_event_names(held));
    const std::string read = fmt::format(
        "{} #{}: processes {}, ECC uncorrectable (volatile) {}, rows remapped (uncorrectable) {}{}, PCIe {}, "
        "clock events {}, persistence {}",
        g.name.empty() ? "GPU" : g.name, g.index, or_unknown(g.compute_processes, std::to_string(g.compute_processes)),
        or_unknown(g.ecc_uncorrected, std::to_string(g.ecc_uncorrected)),
        or_unknown(g.remapped_uncorrectable, std::to_string(g.remapped_uncorrectable)),
        g.remap_pending > 0 || g.remap_failed > 0 ? "" : g.remap_pending == 0 ? ", none pending" : "",
        or_unknown(g.pcie_width, fmt::format("x{} of x{}, gen {} of {}", g.pcie_width, g.pcie_max_width, g.pcie_gen,
                                        g.pcie_max_gen)),
        or_unknown(g.clock_events, clock_event_names(g.clock_events)),
        g.persistence < 0 ? "unknown" : g.persistence ? "on" : "off (each program start re-initialises the GPU)");
    std::string detail;
    for (const std::string& p : problems) detail += p + "; ";
    Check c{"health", fmt::format("gpu{}", g.index), "problems", "<=", double(problems.size()), 0, problems.empty(),
            detail + read, none.source};
    checks.push_back(c);
  }
  return checks;
}

HostLoad read_host_load() {
  HostLoad h;
  h.cpus = std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN)));
  const char* env = std::getenv("PTDP_LOADAVG");
  std::string text;
  if (env) {
    text = env;
  } else {
    std::ifstream f("/proc/loadavg");
    if (!f) {
      h.why = "/proc/loadavg is not readable (not Linux?)";
      return h;
    }
    std::getline(f, text);
  }
  std::istringstream in(text);
  double load = -1;
  if (!(in >> load) || load < 0) {
    h.why = fmt::format("{} does not start with a load average: '{}'", env ? "PTDP_LOADAVG" : "/proc/loadavg", text);
    return h;
  }
  h.load1 = load;
  return h;
}

Check host_load_check(const HostLoad& load, const Threshold& max_per_cpu) {
  if (load.load1 < 0) {
    Check c = skipped_check("health", "host_load", "load/CPU", max_per_cpu, load.why);
    c.op = "<=";
    return c;
  }
  const double per_cpu = load.load1 / load.cpus;
  const bool pass = per_cpu <= max_per_cpu.value;
  const std::string read =
      fmt::format("load average {:.2f} over the last minute on {} CPUs ({:.2f} per CPU)", load.load1, load.cpus, per_cpu);
  return Check{"health", "host_load", "load/CPU", "<=", per_cpu, max_per_cpu.value, pass,
               pass ? read
                    : fmt::format("the host is busy: {}: other work competes with the benchmarks' host threads "
                                  "(kernel launches, NCCL's proxies, data loading)",
                                  read),
               max_per_cpu.source};
}

}  // namespace ptdp
