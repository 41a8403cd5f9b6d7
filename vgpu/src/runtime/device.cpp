// Virtual devices: how many (VGPU_DEVICES), their properties, the current device of each host
// thread, versions, peer access and cudaDeviceSynchronize.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/internal.h"

namespace vgpu {
namespace {
int read_env_devices() {
  const char* v = std::getenv("VGPU_DEVICES");
  if (!v || !*v) return 8;
  const int n = std::atoi(v);
  return std::clamp(n, 0, rt::kMaxDevices);
}
std::atomic<int>& devices() {
  static std::atomic<int> n{read_env_devices()};
  return n;
}
constexpr size_t kTotalGlobalMem = size_t{80} << 30;  // nominal: allocations are host memory
}  // namespace

int device_count() { return devices().load(std::memory_order_relaxed); }

void set_device_count_for_testing(int n) {
  devices().store(n < 0 ? read_env_devices() : std::clamp(n, 0, rt::kMaxDevices));
}

namespace rt {
DeviceState& device_state(int dev) {
  static DeviceState* all = new DeviceState[kMaxDevices];  // never destroyed: workers outlive main
  return all[dev];
}
}  // namespace rt

int current_device() { return rt::thread_state().device; }

}  // namespace vgpu

using vgpu::rt::ret;

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return ret(cudaErrorInvalidValue);
  const int n = vgpu::device_count();
  *count = n;
  if (n == 0) return ret(cudaErrorNoDevice);  // as the CUDA runtime on a machine without a GPU
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  const int n = vgpu::device_count();
  if (n == 0) return ret(cudaErrorNoDevice);
  if (device < 0 || device >= n) return ret(cudaErrorInvalidDevice);
  vgpu::rt::thread_state().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return ret(cudaErrorInvalidValue);
  if (vgpu::device_count() == 0) return ret(cudaErrorNoDevice);
  *device = vgpu::rt::thread_state().device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return ret(cudaErrorInvalidValue);
  const int n = vgpu::device_count();
  if (n == 0) return ret(cudaErrorNoDevice);
  if (device < 0 || device >= n) return ret(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "vgpu (host emulation of a GPU)", sizeof prop->name - 1);
  prop->totalGlobalMem = vgpu::kTotalGlobalMem;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->pciBusID = device;
  prop->pciDeviceID = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return ret(cudaErrorInvalidValue);
  cudaDeviceProp p;
  const cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    default: return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// All virtual devices share the host's memory: every distinct pair can access each other.
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  if (!canAccessPeer) return ret(cudaErrorInvalidValue);
  const int n = vgpu::device_count();
  if (n == 0) return ret(cudaErrorNoDevice);
  if (device < 0 || device >= n || peerDevice < 0 || peerDevice >= n) return ret(cudaErrorInvalidDevice);
  *canAccessPeer = device != peerDevice ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  const int dev = vgpu::rt::thread_state().device;
  cudaError_t e = vgpu::rt::device_error(dev);
  if (e != cudaSuccess) return ret(e);
  return ret(vgpu::rt::sync_device(dev));
}

// The vgpu implements the CUDA 13.0 runtime API subset; it reports the same "driver" version.
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (!runtimeVersion) return ret(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return ret(cudaErrorInvalidValue);
  *driverVersion = CUDART_VERSION;
  return cudaSuccess;
}
