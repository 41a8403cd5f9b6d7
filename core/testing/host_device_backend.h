// A backend for testing the device plumbing where there is no GPU: its tensors are host
// memory labelled Device::CUDA, and every op refuses a tensor that is not so labelled (Backend's
// op contracts), as the CUDA backend does. So uploads, staging communicators and checkpoints of
// device tensors run for real; the arithmetic is the CPU backend's.
#pragma once
#include <memory>

#include "core/backend/backend.h"

namespace ptdp::testing {

std::unique_ptr<Backend> make_host_device_backend();

}  // namespace ptdp::testing
