// Error reporting of the runtime: per-host-thread last error, sticky (context-corrupting) errors,
// and the names and descriptions of every error code.
#include "runtime/internal.h"

namespace vgpu {
namespace rt {

ThreadState& thread_state() {
  thread_local ThreadState t;
  return t;
}

cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) thread_state().last = e;
  return e;
}

// CUDA: these errors leave "the process in an inconsistent state and any further CUDA work will
// return the same error"; the process has to terminate to recover.
bool is_sticky(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorAssert ||
         e == cudaErrorLaunchTimeout;
}

void make_sticky(int dev, cudaError_t e) {
  int expected = 0;
  device_state(dev).sticky.compare_exchange_strong(expected, static_cast<int>(e));
}

cudaError_t device_error(int dev) {
  const int n = device_count();
  if (n == 0) return cudaErrorNoDevice;
  if (dev < 0 || dev >= n) return cudaErrorInvalidDevice;
  return static_cast<cudaError_t>(device_state(dev).sticky.load(std::memory_order_relaxed));
}

cudaError_t context_error() { return device_error(thread_state().device); }

}  // namespace rt

void set_last_error(cudaError_t e) { rt::ret(e); }

}  // namespace vgpu

using vgpu::rt::thread_state;

// CUDA: "Returns the last error that has been produced by any of the runtime calls in the same
// instance of the CUDA Runtime library in the host thread and resets it to cudaSuccess"; a sticky
// error cannot be reset.
cudaError_t cudaGetLastError(void) {
  const int n = vgpu::device_count();
  const int dev = thread_state().device;
  if (n > 0 && dev >= 0 && dev < n) {
    const cudaError_t sticky = static_cast<cudaError_t>(vgpu::rt::device_state(dev).sticky.load());
    if (sticky != cudaSuccess) return thread_state().last = sticky;
  }
  const cudaError_t e = thread_state().last;
  thread_state().last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  const int n = vgpu::device_count();
  const int dev = thread_state().device;
  if (n > 0 && dev >= 0 && dev < n) {
    const cudaError_t sticky = static_cast<cudaError_t>(vgpu::rt::device_state(dev).sticky.load());
    if (sticky != cudaSuccess) return sticky;
  }
  return thread_state().last;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}
