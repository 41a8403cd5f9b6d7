// The backend and communicator of one training rank. --backend cpu: the CPU backend and the
// world as given. --backend cuda: the CUDA backend on this rank's GPU, and the world wrapped so
// that device tensors reach the communicator: through host memory for --comm local and mpi,
// as they are for --comm nccl (NCCL bootstrapped over the given world: MPI processes, or thread
// ranks with one GPU each).
#pragma once
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/config/run_config.h"

namespace ptdp {

// UsageError naming --backend when this build or machine cannot run c.backend (a CUDA
// backend and at least one GPU for cuda; for --comm nccl on thread ranks, a GPU per rank),
// before any work.
void require_backend_here(const RunConfig& c, bool thread_ranks);

// Whether ranks of one NCCL communicator may share a GPU here (NCCL 2.30+ with
// NCCL_MULTI_RANK_GPU_ENABLE=1, core/comm/nccl/nccl_sharing.h); when not, *why says what would
// allow it. False in a build without NCCL.
bool nccl_ranks_may_share_gpus(std::string* why);

// Whether mpirun/mpiexec (Open MPI, MPICH/PMI, PMIx) or srun started this process as one of
// several: --comm nccl then runs one process per GPU over MPI, otherwise thread ranks.
bool started_by_launcher();

// The world a launcher started this process in, from its environment: Open MPI's mpirun
// (OMPI_COMM_WORLD_SIZE/RANK), MPICH or Intel MPI (PMI_SIZE/RANK), srun (SLURM_STEP_NUM_TASKS,
// SLURM_PROCID). size 1 and rank 0 when none did.
struct LauncherWorld {
  std::string launcher;  // "mpirun", "mpiexec (PMI)", "srun" or empty
  int size = 1, rank = 0;
};
LauncherWorld launcher_world();

// The UsageError text for `ptdp train --comm local` started by a launcher as one of several
// processes (each would run the whole job alone and append its own row); empty when it was not.
std::string local_comm_under_launcher(const LauncherWorld& w);

class RankDevice {
 public:
  // UsageError naming --backend/--comm when this build or machine cannot run them.
  RankDevice(const RunConfig& c, Communicator& world);
  ~RankDevice();
  Backend& backend() { return *backend_; }
  Communicator& world() { return wrapped_ ? *wrapped_ : given_; }
  // "cpu" or the GPU's name and index.
  std::string device_name() const;
  void reset_peak();
  // This rank's peak bytes of tensors. --backend cuda: its GPU's allocator's peak, or, where thread
  // ranks share the GPU, the peak of what this rank's backend allocated (its stream's blocks).
  // --backend cpu: the host allocator's peak over local_ranks, the ranks of this process sharing it.
  double peak_gb(int local_ranks) const;

 private:
  Communicator& given_;
  int device_ = -1;  // the GPU, -1 on the CPU backend
  bool shares_device_ = false;  // other thread ranks of this process use the same GPU
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> nccl_;
  std::unique_ptr<Communicator> wrapped_;
};

}  // namespace ptdp
