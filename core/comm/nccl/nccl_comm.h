// The NCCL communicator: one GPU per rank, tensors in device memory, work on a stream of its
// own. Bootstrapped over another communicator (the MPI world, or thread ranks): rank 0 makes the
// ncclUniqueId and broadcasts it; sub-groups come from ncclCommSplit.
// Ordering: every operation is queued after the work already queued on the rank's compute stream
// (an event and cudaStreamWaitEvent, no host synchronisation), so collectives overlap the compute
// queued after them. Sends and receives are collected and issued together as one NCCL group when
// something waits for one of them or another operation starts, so that pipeline stages sending
// to each other progress together. Waits poll an event and NCCL's asynchronous error, and abort
// the communicator after the timeout instead of hanging; an aborted communicator is never used
// again. Built with the CUDA backend only.
#pragma once
#include <chrono>
#include <memory>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"

namespace ptdp {

// Every rank of `bootstrap` calls this with the GPU it drives; `compute` (a CUDA backend on that
// GPU, or null) is the backend whose queued work each operation is ordered after.
std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(300),
                                              Backend* compute = nullptr);

}  // namespace ptdp
