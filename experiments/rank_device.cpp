#include "experiments/rank_device.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "core/comm/device_comm.h"
#include "core/common/error.h"
#include "core/tensor/allocator.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#endif
#ifdef PTDP_HAVE_NCCL
#include "core/comm/nccl/nccl_comm.h"
#include "core/comm/nccl/nccl_sharing.h"
#endif

namespace ptdp {

bool started_by_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"})
    if (std::getenv(v)) return true;
  return false;
}

LauncherWorld launcher_world() {
  struct Vars {
    const char *launcher, *size, *rank;
  };
  for (const Vars& v : {Vars{"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                        Vars{"mpiexec (PMI)", "PMI_SIZE", "PMI_RANK"},
                        Vars{"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"}}) {
    const char* size = std::getenv(v.size);
    if (!size) continue;
    const char* rank = std::getenv(v.rank);
    LauncherWorld w;
    w.launcher = v.launcher;
    w.size = std::max(1, std::atoi(size));
    w.rank = rank ? std::max(0, std::atoi(rank)) : 0;
    return w;
  }
  return {};
}

std::string local_comm_under_launcher(const LauncherWorld& w) {
  if (w.size <= 1) return {};
  return fmt::format("started by {} with {} processes but --comm local: each process would run the whole job on its "
                     "own ({} separate runs, {} result rows); add --comm mpi to make them the ranks of one job, or "
                     "start ptdp once without {} (--comm local runs its ranks as threads of one process)",
                     w.launcher, w.size, w.size, w.size, w.launcher);
}

bool nccl_ranks_may_share_gpus(std::string* why) {
#ifdef PTDP_HAVE_NCCL
  return nccl_ranks_share_gpus(why);
#else
  *why = "this build has no NCCL";
  return false;
#endif
}

#ifdef PTDP_HAVE_CUDA
namespace {

// This process's index among those on its node, from the launcher (mpirun, srun), or -1.
int local_rank_from_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}

}  // namespace
#endif

void require_backend_here(const RunConfig& c, bool thread_ranks) {
  if (c.backend == BackendKind::Cpu) return;
#ifdef PTDP_HAVE_CUDA
  std::string why;
  const int gpus = cuda::device_count(&why);
  if (gpus == 0) usage_error("--backend {}: no GPU here ({})", c.backend, why);
  // NCCL before 2.30 refuses two ranks of one communicator on one GPU.
  std::string no_sharing;
  if (c.comm == CommKind::Nccl && thread_ranks && c.ranks > gpus && !nccl_ranks_may_share_gpus(&no_sharing))
    usage_error("--comm nccl runs one rank per GPU: {} ranks but {} GPU(s) here; {} (--comm local lets ranks share "
                "a GPU)",
                c.ranks, gpus, no_sharing);
#else
  usage_error("--backend {}: this build has no CUDA backend (configure with -DPTDP_CUDA=ON where nvcc is installed)",
              c.backend);
#endif
}

RankDevice::RankDevice(const RunConfig& c, Communicator& world) : given_(world) {
  const bool threads = world.backend() == "local";
  require_backend_here(c, threads);
  if (c.backend == BackendKind::Cpu) {
    backend_ = make_cpu_backend();
    return;
  }
#ifdef PTDP_HAVE_CUDA
  const int gpus = cuda::device_count();
  // Thread ranks share the GPUs round-robin (one GPU: all of them, each on its own stream);
  // processes take the GPU of their index on the node.
  const int local = threads ? world.rank() : local_rank_from_launcher();
  std::string no_sharing;
  if (c.comm == CommKind::Nccl && local >= gpus && !nccl_ranks_may_share_gpus(&no_sharing))
    usage_error("--comm nccl runs one rank per GPU: local rank {} has none of its own ({} GPU(s) on this node; start "
                "at most {} processes per node); {}",
                local, gpus, gpus, no_sharing);
  device_ = (local >= 0 ? local : world.rank()) % gpus;
  shares_device_ = threads && world.size() > gpus;
  backend_ = make_cuda_backend(device_);
  if (c.comm == CommKind::Nccl) {
#ifdef PTDP_HAVE_NCCL
    nccl_ = make_nccl_world(world, device_, world.timeout(), backend_.get());
    wrapped_ = make_device_comm(*nccl_, *backend_, Device::CUDA);
#else
    usage_error("--comm nccl: this build has no NCCL");
#endif
  } else {
    wrapped_ = make_device_comm(world, *backend_, Device::CPU);
  }
#endif
}

RankDevice::~RankDevice() {
  wrapped_.reset();
  nccl_.reset();
}

std::string RankDevice::device_name() const {
#ifdef PTDP_HAVE_CUDA
  if (device_ >= 0) return cuda::device_name(device_) + " (GPU " + std::to_string(device_) + ")";
#endif
  return "cpu";
}

void RankDevice::reset_peak() {
#ifdef PTDP_HAVE_CUDA
  if (device_ >= 0) {
    cuda::DeviceAllocator& a = cuda::DeviceAllocator::for_device(device_);
    return shares_device_ ? a.reset_peak(cuda_stream(*backend_)) : a.reset_peak();
  }
#endif
  CachingHostAllocator::instance().reset_peak();
}

double RankDevice::peak_gb(int local_ranks) const {
#ifdef PTDP_HAVE_CUDA
  if (device_ >= 0) {
    const cuda::DeviceAllocator& a = cuda::DeviceAllocator::for_device(device_);
    return double(shares_device_ ? a.peak_bytes_in_use(cuda_stream(*backend_)) : a.peak_bytes_in_use()) / 1e9;
  }
#endif
  return double(CachingHostAllocator::instance().peak_bytes_in_use()) / 1e9 / std::max(1, local_ranks);
}

}  // namespace ptdp
