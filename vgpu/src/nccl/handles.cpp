// Communicator handles and their tombstones, error strings, the last-error text, the version and
// unique ids of the NCCL subset.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_set>

#include "nccl/comm.h"

namespace vgpu::nccl {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_set<ncclComm*> all;  // every handle ever made (live or tombstone)
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: stream workers may use it during exit
  return *r;
}

// Last-error text: per host thread for API errors; process-wide for asynchronous errors found
// by stream workers. A stamp orders them so ncclGetLastError returns the newer one.
std::atomic<uint64_t> g_stamp{0};
struct ThreadLast {
  uint64_t stamp = 0;
  std::string text;
  std::string returned;  // storage for the pointer ncclGetLastError hands out
};
ThreadLast& thread_last() {
  thread_local ThreadLast t;
  return t;
}
struct AsyncLast {
  std::mutex mu;
  uint64_t stamp = 0;
  std::string text;
};
AsyncLast& async_last() {
  static AsyncLast* a = new AsyncLast;
  return *a;
}

}  // namespace

ncclComm_t new_comm(std::shared_ptr<Clique> clique, int rank) {
  auto* c = new ncclComm;
  c->rank = rank;
  c->nranks = clique->size();
  c->device = clique->device(rank);
  c->clique = std::move(clique);
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  r.all.insert(c);
  return c;
}

ncclResult_t lookup(ncclComm_t comm, const char* api, Handle* out) {
  if (!comm) return fail(ncclInvalidArgument, std::string(api) + ": comm argument is NULL");
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  if (!r.all.count(comm) || comm->magic != ncclComm::kMagic) {
    lk.unlock();
    std::ostringstream m;
    m << api << " got communicator handle " << static_cast<const void*>(comm)
      << ", which no ncclCommInitRank, ncclCommInitAll or ncclCommSplit returned; NCCL communicator arguments "
         "must be valid communicators.";
    report_violation("invalid handle", m.str());
    return fail(ncclInvalidArgument, m.str());
  }
  if (!comm->clique) {
    const char* by = comm->freed_by;
    auto at = comm->freed_at;
    lk.unlock();
    std::ostringstream m;
    m << api << " on a communicator freed by " << by << " at " << (at ? at->describe() : std::string("?"))
      << "\n    (rank " << comm->rank << " of " << comm->nranks << ", device " << comm->device
      << "). Both calls free the communicator (NCCL: ncclCommAbort \"frees resources that are allocated to the "
         "communicator object\"; \"the communicator should no longer be accessed after ncclCommDestroy "
         "returns\"), so the handle is dangling (use after free).";
    report_violation("use after free", m.str());
    return fail(ncclInvalidArgument, m.str());
  }
  out->comm = comm;
  out->clique = comm->clique;
  out->rank = comm->rank;
  out->nranks = comm->nranks;
  out->device = comm->device;
  return ncclSuccess;
}

void free_comm(ncclComm* comm, const char* by) {
  auto at = std::make_shared<const Site>(capture_site(by));
  std::shared_ptr<Clique> dropped;
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  dropped = std::move(comm->clique);
  comm->freed_by = by;
  comm->freed_at = std::move(at);
}

ncclResult_t fail(ncclResult_t e, const std::string& message) {
  ThreadLast& t = thread_last();
  t.stamp = ++g_stamp;
  t.text = message;
  return e;
}

void note_async_error(const std::string& message) {
  AsyncLast& a = async_last();
  std::lock_guard lk(a.mu);
  a.stamp = ++g_stamp;
  a.text = message;
}

double env_seconds(const char* name, double dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return (end && *end == '\0' && d >= 0) ? d : dflt;
}

int emulated_version() {
  const char* v = std::getenv("VGPU_NCCL_VERSION");
  if (!v || !*v) return NCCL_VERSION_CODE;
  int major = 0, minor = 0, patch = 0;
  char rest = 0;
  if (std::sscanf(v, "%d.%d.%d%c", &major, &minor, &patch, &rest) != 3 || major != 2 || minor < 0 || minor > 99 ||
      patch < 0 || patch > 99) {
    std::fprintf(stderr, "vgpu: VGPU_NCCL_VERSION='%s' is not a NCCL 2 version such as 2.30.7\n", v);
    std::abort();
  }
  return NCCL_VERSION(major, minor, patch);
}

}  // namespace vgpu::nccl

using namespace vgpu::nccl;

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version argument is NULL");
  *version = emulated_version();
  return ncclSuccess;
}

// NCCL: "Generates an Id to be used in ncclCommInitRank"; here unique within the process (its
// ranks are threads): a tag, the process id and a counter.
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId argument is NULL");
  static std::atomic<uint64_t> counter{0};
  std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
  const uint64_t n = ++counter;
  const uint64_t pid = uint64_t(getpid());
  std::memcpy(uniqueId->internal, "vgpu-nccl-id", 12);
  std::memcpy(uniqueId->internal + 16, &pid, sizeof(pid));
  std::memcpy(uniqueId->internal + 24, &n, sizeof(n));
  return ncclSuccess;
}

// NCCL: "Returns a human-readable string corresponding to the passed error code."
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled CUDA error (see ncclGetLastError)";
    case ncclSystemError:
      return "unhandled system error (see ncclGetLastError)";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage:
      return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError:
      return "remote rank exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

// NCCL: "Returns a human-readable string corresponding to the last error that occurred in NCCL.
// ... could be unrelated to the current call and can be a result of previously launched
// asynchronous operations". The newer of this thread's last API error and the process's last
// asynchronous error; a non-null comm must be a valid handle. The text stays valid until this
// thread's next ncclGetLastError.
const char* ncclGetLastError(ncclComm_t comm) {
  ThreadLast& t = thread_last();
  if (comm) {
    Handle h;
    const uint64_t keep = t.stamp;
    std::string keep_text = t.text;
    if (lookup(comm, "ncclGetLastError", &h) != ncclSuccess) {
      t.returned = t.text;
      return t.returned.c_str();
    }
    t.stamp = keep;
    t.text = std::move(keep_text);
  }
  AsyncLast& a = async_last();
  std::lock_guard lk(a.mu);
  t.returned = a.stamp > t.stamp ? a.text : t.text;
  return t.returned.c_str();
}
