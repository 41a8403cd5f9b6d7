// Makes `device` current for a scope and restores the previous device after it.
#pragma once
#include <cuda_runtime.h>

#include "core/backend/cuda/cuda_check.h"

namespace ptdp::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    PTDP_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) PTDP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace ptdp::cuda
