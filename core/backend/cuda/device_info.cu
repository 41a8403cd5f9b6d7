#include "core/backend/cuda/device_info.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp::cuda {

int device_count(std::string* reason) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (reason) *reason = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  if (n == 0 && reason) *reason = "no CUDA device found";
  return n;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess)
    throw RuntimeError(fmt::format("cudaGetDeviceProperties({}) failed: {} at {}:{}", device,
                                   cudaGetErrorString(e), __FILE__, __LINE__));
  return prop.name;
}

std::string versions() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0)
    return fmt::format("runtime {}.{}, no driver", rt / 1000, (rt % 1000) / 10);
  return fmt::format("runtime {}.{}, driver {}.{}", rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
}

}  // namespace ptdp::cuda
