// Communicator queries and teardown: ncclCommCount/UserRank/CuDevice/GetAsyncError, and
// ncclCommDestroy / ncclCommAbort, which leave a tombstone so later use is reported.
#include <chrono>
#include <sstream>

#include "nccl/comm.h"

using namespace vgpu::nccl;

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommCount", &h); r != ncclSuccess) return r;
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count argument is NULL");
  *count = h.nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommUserRank", &h); r != ncclSuccess) return r;
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank argument is NULL");
  *rank = h.rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommCuDevice", &h); r != ncclSuccess) return r;
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice: device argument is NULL");
  *device = h.device;
  return ncclSuccess;
}

// NCCL: "Queries the progress and potential errors of asynchronous NCCL operations ... If there
// has been an error on the communicator, user should destroy the communicator with
// ncclCommAbort()". Here: ncclSuccess, or ncclInvalidUsage once an operation of this rank had
// mismatched arguments (ncclInProgress never: communicators are blocking).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommGetAsyncError", &h); r != ncclSuccess) return r;
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError argument is NULL");
  *asyncError = h.clique->error(h.rank);
  return ncclSuccess;
}

// NCCL: "Destroy a communicator object comm. Frees resources that are allocated to the
// communicator object comm and aborts any uncompleted operations before destroying the
// communicator." The rank's queued and running operations on the communicator return (their
// stream items finish without moving data); peers waiting for this rank keep waiting, as on a GPU,
// until they abort too. NULL is accepted, as NCCL does.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommAbort", &h); r != ncclSuccess) return r;
  h.clique->abort(h.rank);
  free_comm(h.comm, "ncclCommAbort");
  return ncclSuccess;
}

// NCCL: ncclCommDestroy calls ncclCommFinalize, which "will flush all uncompleted operations",
// so it blocks while this rank's operations on the communicator are still running; "the
// communicator should no longer be accessed after ncclCommDestroy returns". Operations that
// cannot complete (a peer never posts its part, or aborted) would hang it forever on a GPU: once
// VGPU_NCCL_DESTROY_GRACE_S (default 2 s) passes without progress of the communicator, that is
// reported, the operations are aborted and the call returns ncclInvalidUsage.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommDestroy", &h); r != ncclSuccess) return r;
  const auto grace = std::chrono::milliseconds(int64_t(env_seconds("VGPU_NCCL_DESTROY_GRACE_S", 2) * 1000));
  int left = 0;
  ncclResult_t result = ncclSuccess;
  if (!h.clique->wait_idle(h.rank, grace, &left)) {
    std::ostringstream m;
    m << "ncclCommDestroy with " << left
      << " operations in flight that cannot complete: use ncclCommAbort after a failure (rank " << h.rank << " of "
      << h.nranks << ", device " << h.device
      << "). ncclCommDestroy waits for the communicator's uncompleted operations (NCCL: ncclCommFinalize \"will "
         "flush all uncompleted operations\"), and these wait for peer ranks that never post their part or were "
         "aborted, so it would hang on a GPU. They were aborted here.";
    vgpu::report_violation("nccl destroy in flight", m.str());
    h.clique->abort(h.rank);
    result = fail(ncclInvalidUsage, m.str());
  }
  free_comm(h.comm, "ncclCommDestroy");
  return result;
}
