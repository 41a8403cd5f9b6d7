// The NCCL communicator: one GPU per rank, tensors in device memory, work on a stream of its
// own. Bootstrapped over another communicator (the MPI world): rank 0 makes the ncclUniqueId
// and broadcasts it; sub-groups come from ncclCommSplit. Waits poll the stream and NCCL's
// asynchronous error, and abort the communicator after the timeout instead of hanging.
// Built with the CUDA backend only.
#pragma once
#include <memory>

#include "core/comm/communicator.h"

namespace ptdp {

// Every rank of `bootstrap` calls this with the GPU it drives.
std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace ptdp
