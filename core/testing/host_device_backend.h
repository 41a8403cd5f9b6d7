// A backend for testing the device plumbing where there is no GPU: its tensors are host
// memory labelled Device::CUDA, and every op refuses a tensor that is not so labelled (Backend's
// op contracts), as the CUDA backend does. So uploads, staging communicators and checkpoints of
// device tensors run for real; the arithmetic is the CPU backend's.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/backend/backend.h"

namespace ptdp::testing {

// A stand-in for cuDNN's fused attention: why it refuses a rank's causal block (b, s, a, g, hd, dt),
// empty where it takes it. A backend given one has cuDNN (its block ops still compute on the CPU).
using CudnnStandIn = std::function<std::string(int b, int s, int a, int g, int hd, DType dt)>;

std::unique_ptr<Backend> make_host_device_backend(CudnnStandIn cudnn = {});

}  // namespace ptdp::testing
