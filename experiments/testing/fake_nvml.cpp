// A stand-in for the driver's NVML with the calls `ptdp accept`'s health check makes. Its GPUs
// report what PTDP_FAKE_NVML says, "key=value,..." (defaults: a healthy H100):
//   gpus=N  name=TEXT  processes=N  persistence=0|1  ecc=N  remapped=N  pending=0|1  failed=0|1
//   width=N  max_width=N  gen=N  max_gen=N  events=BITS (decimal or 0x...)  power_mw=N  temp=N
//   sm_mhz=N  only=K (the values
//   above apply to GPU K alone, the others stay healthy)  init=FAIL (nvmlInit_v2 fails)
// Not NVIDIA's library: the function names and argument types of NVML's documented C interface.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

namespace {

std::map<std::string, std::string> settings() {
  std::map<std::string, std::string> m;
  const char* env = std::getenv("PTDP_FAKE_NVML");
  std::stringstream in(env ? env : "");
  std::string item;
  while (std::getline(in, item, ','))
    if (const size_t eq = item.find('='); eq != std::string::npos) m[item.substr(0, eq)] = item.substr(eq + 1);
  return m;
}

// GPU `index`'s value of `key`: the setting where it applies to this GPU, else the healthy default.
unsigned long long value(void* device, const char* key, unsigned long long healthy) {
  const auto m = settings();
  const unsigned index = unsigned(reinterpret_cast<uintptr_t>(device)) - 1;
  const auto only = m.find("only");
  if (only != m.end() && std::stoul(only->second) != index) return healthy;
  const auto it = m.find(key);
  return it == m.end() ? healthy : std::stoull(it->second, nullptr, 0);
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const auto m = settings();
  const auto it = m.find("init");
  return it != m.end() && it->second == "FAIL" ? 9 /* NVML_ERROR_DRIVER_NOT_LOADED */ : 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }

int nvmlDeviceGetCount_v2(unsigned* n) {
  const auto m = settings();
  const auto it = m.find("gpus");
  *n = it == m.end() ? 1 : unsigned(std::stoul(it->second));
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** device) {
  *device = reinterpret_cast<void*>(uintptr_t(i) + 1);
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned length) {
  const auto m = settings();
  const auto it = m.find("name");
  std::strncpy(name, it == m.end() ? "NVIDIA H100 80GB HBM3" : it->second.c_str(), length - 1);
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* d, unsigned* count, void*) {
  *count = unsigned(value(d, "processes", 0));
  return *count == 0 ? 0 : 7;  // NVML_ERROR_INSUFFICIENT_SIZE: more processes than the (empty) buffer holds
}
int nvmlDeviceGetPersistenceMode(void* d, unsigned* on) {
  *on = unsigned(value(d, "persistence", 1));
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* n) {
  *n = type == 1 && counter == 0 ? value(d, "ecc", 0) : 0;  // uncorrected, volatile
  return 0;
}
int nvmlDeviceGetRemappedRows(void* d, unsigned* corrected, unsigned* uncorrected, unsigned* pending,
                              unsigned* failed) {
  *corrected = 0;
  *uncorrected = unsigned(value(d, "remapped", 0));
  *pending = unsigned(value(d, "pending", 0));
  *failed = unsigned(value(d, "failed", 0));
  return 0;
}
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* w) {
  *w = unsigned(value(d, "width", 16));
  return 0;
}
int nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* w) {
  *w = unsigned(value(d, "max_width", 16));
  return 0;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* g) {
  *g = unsigned(value(d, "gen", 5));
  return 0;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* g) {
  *g = unsigned(value(d, "max_gen", 5));
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* bits) {
  *bits = value(d, "events", 0);
  return 0;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned* milliwatts) {
  *milliwatts = unsigned(value(d, "power_mw", 650000));
  return 0;
}
int nvmlDeviceGetTemperature(void* d, int, unsigned* celsius) {
  *celsius = unsigned(value(d, "temp", 55));
  return 0;
}
int nvmlDeviceGetClockInfo(void* d, int, unsigned* mhz) {
  *mhz = unsigned(value(d, "sm_mhz", 1980));
  return 0;
}

}  // extern "C"
