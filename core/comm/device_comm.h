// A communicator for ranks whose tensors live on a GPU, around one that needs its buffers in
// a given place: host memory (local, mpi) or device memory (nccl). For host memory every call
// first waits for the rank's queued compute (Backend::synchronize), so the communicator reads
// finished data; a device communicator orders itself after the compute stream instead (no host
// wait, so collectives overlap the compute queued after them). A tensor in the other place is
// copied through a temporary buffer, there and back. Splits are wrapped the same way. With the
// CPU backend it only forwards.
#pragma once
#include <memory>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"

namespace ptdp {

// `be` must outlive the result; `place` is where `inner` needs its buffers.
std::unique_ptr<Communicator> make_device_comm(std::unique_ptr<Communicator> inner, Backend& be, Device place);
// The same around a communicator owned elsewhere (it must outlive the result).
std::unique_ptr<Communicator> make_device_comm(Communicator& inner, Backend& be, Device place);

}  // namespace ptdp
