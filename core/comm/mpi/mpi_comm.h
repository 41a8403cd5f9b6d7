// The MPI communicator: ranks are processes started by mpirun or srun. Collectives run as
// non-blocking MPI calls polled until done, so that a rank that never arrives ends the job with
// a message (naming the waiting rank, the call and the group) after the timeout instead of
// hanging: the waiting rank then calls MPI_Abort.
#pragma once
#include <memory>

#include "core/comm/communicator.h"

namespace ptdp {

// MPI_Init on construction (if not yet initialised), MPI_Finalize on destruction.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // MPI_COMM_WORLD as a Communicator.
  std::unique_ptr<Communicator> world(std::chrono::milliseconds timeout = std::chrono::seconds(300));
  static bool launched_by_mpi();  // an MPI launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...) is set

 private:
  bool owns_ = false;
};

}  // namespace ptdp
