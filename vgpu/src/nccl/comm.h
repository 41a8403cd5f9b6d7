// Internal state of the NCCL subset shared by its files: communicator handles (never freed, so
// a handle used after ncclCommAbort/Destroy is recognised as such), last-error text, groups.
#pragma once
#include <memory>
#include <string>

#include "nccl/rendezvous.h"

// One rank of a communicator. Handles live forever: freeing one (ncclCommAbort/Destroy) drops
// its clique and leaves a tombstone saying who freed it, where.
struct ncclComm {
  static constexpr uint64_t kMagic = 0x6e63636c636f6d6dull;  // "ncclcomm"
  uint64_t magic = kMagic;
  std::shared_ptr<vgpu::nccl::Clique> clique;  // null once freed
  int rank = 0;
  int nranks = 0;
  int device = 0;
  const char* freed_by = nullptr;              // "ncclCommAbort" / "ncclCommDestroy"
  std::shared_ptr<const vgpu::Site> freed_at;  // where
};

namespace vgpu::nccl {

// A live communicator's fields, copied under the registry lock.
struct Handle {
  ncclComm* comm = nullptr;
  std::shared_ptr<Clique> clique;
  int rank = 0, nranks = 0, device = 0;
};

// Makes a handle for rank `rank` of `clique` (on clique->device(rank)).
ncclComm_t new_comm(std::shared_ptr<Clique> clique, int rank);
// Looks comm up for `api`. NULL: ncclInvalidArgument (an API error, as NCCL returns it). A handle
// no NCCL call returned, or one freed by ncclCommAbort/Destroy: a violation, ncclInvalidArgument.
ncclResult_t lookup(ncclComm_t comm, const char* api, Handle* out);
// Frees a live handle, leaving a tombstone naming `by` and the calling site.
void free_comm(ncclComm* comm, const char* by);

// Last error text (ncclGetLastError): set for API errors on the calling thread; async errors of
// operations (mismatches) are recorded process-wide. Returns e, for `return fail(e, ...)`.
ncclResult_t fail(ncclResult_t e, const std::string& message);
void note_async_error(const std::string& message);

// Seconds from the environment variable `name` (default when unset or not a number).
double env_seconds(const char* name, double dflt);

// The NCCL version emulated: NCCL_VERSION_CODE of vgpu/include/nccl.h, or VGPU_NCCL_VERSION
// ("2.30.7") to behave as that release where releases differ (ncclGetVersion; from 2.30 several
// ranks of a communicator may share a GPU when NCCL_MULTI_RANK_GPU_ENABLE=1).
int emulated_version();

// True while the calling thread is inside ncclGroupStart/End.
bool in_group();
// ncclCommInitRank inside a group: the wait for the other ranks happens at ncclGroupEnd.
struct PendingInit;
void defer_init(ncclComm_t* out, std::shared_ptr<PendingInit> p, int rank);
// Joins the init rendezvous of `id` as `rank` of `nranks` on `device`; then waits for it.
ncclResult_t init_join(const ncclUniqueId& id, int nranks, int rank, int device, std::shared_ptr<PendingInit>* out);
ncclResult_t init_wait(const std::shared_ptr<PendingInit>& p, int rank, ncclComm_t* comm);

// One operation call (ncclAllReduce, ncclSend, ...) checked and ready: queued on its stream now,
// or at the outermost ncclGroupEnd.
struct Buffer {
  const void* ptr;
  size_t bytes;
  Access access;
};
ncclResult_t submit(const Handle& h, cudaStream_t stream, const Op& op, const Buffer* buffers, int nbuffers, Site site);
// Records the error of a call inside a group (ncclGroupEnd then fails the group); returns e.
ncclResult_t group_error(ncclResult_t e);

// The executor that moves data between the ranks' device buffers (exec.cpp).
Executor& device_executor();

}  // namespace vgpu::nccl
