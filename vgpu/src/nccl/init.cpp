// Communicator creation: ncclCommInitRank (threads meet at a unique id), ncclCommInitAll (one
// thread makes every rank) and ncclCommSplit (a collective over the parent's ranks).
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>

#include "nccl/comm.h"

namespace vgpu::nccl {

// The ranks that called ncclCommInitRank with one unique id so far.
struct PendingInit {
  explicit PendingInit(int n) : nranks(n), devices(size_t(n), -1), messages(size_t(n)) {}
  int nranks;
  std::vector<int> devices;  // -1: not joined
  int joined = 0;
  bool done = false;
  ncclResult_t result = ncclSuccess;
  std::vector<std::string> messages;  // per rank, when result is an error
  std::shared_ptr<Clique> clique;
  std::string key;
};

namespace {

struct InitTable {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::shared_ptr<PendingInit>> open;
};
InitTable& table() {
  static InitTable* t = new InitTable;
  return *t;
}

std::chrono::milliseconds init_timeout() {
  return std::chrono::milliseconds(int64_t(env_seconds("VGPU_NCCL_INIT_TIMEOUT_S", 120) * 1000));
}

// NCCL checks at init that no two ranks of a communicator use one GPU and fails with
// ncclInvalidUsage: before 2.30 "Duplicate GPU detected : rank %d and rank %d both on CUDA device
// %lx"; from 2.30 "Multiple Ranks are using the same GPU/Partition. Set
// NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration", and with that variable set it
// allows them. Returns whether a refused duplicate exists; messages[r] names r's own duplicate,
// else the first one.
bool find_duplicates(const std::vector<int>& devices, std::vector<std::string>* messages) {
  const bool sharing_release = emulated_version() >= NCCL_VERSION(2, 30, 0);
  const char* enable = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  if (sharing_release && enable && std::string(enable) == "1") return false;
  const int n = int(devices.size());
  std::string first;
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      if (q != r && devices[size_t(q)] == devices[size_t(r)]) {
        (*messages)[size_t(r)] =
            sharing_release
                ? "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this "
                  "configuration (rank " +
                      std::to_string(r) + " and rank " + std::to_string(q) + " on CUDA device " +
                      std::to_string(devices[size_t(r)]) + ")"
                : "Duplicate GPU detected: rank " + std::to_string(r) + " and rank " + std::to_string(q) +
                      " both on CUDA device " + std::to_string(devices[size_t(r)]);
        if (first.empty()) first = (*messages)[size_t(r)];
        break;
      }
  if (first.empty()) return false;
  for (std::string& m : *messages)
    if (m.empty()) m = first;
  return true;
}

}  // namespace

ncclResult_t init_join(const ncclUniqueId& id, int nranks, int rank, int device, std::shared_ptr<PendingInit>* out) {
  InitTable& t = table();
  std::lock_guard lk(t.mu);
  const std::string key(id.internal, sizeof(id.internal));
  std::shared_ptr<PendingInit>& slot = t.open[key];
  if (!slot) {
    slot = std::make_shared<PendingInit>(nranks);
    slot->key = key;
  }
  const std::shared_ptr<PendingInit> p = slot;  // the entry may be erased below
  if (p->nranks != nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " passed nranks " +
                                         std::to_string(nranks) +
                                         " but the ranks that joined this unique id before passed " +
                                         std::to_string(p->nranks) + "; every rank must pass the same nranks");
  if (p->devices[size_t(rank)] != -1)
    return fail(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) +
                                      " joined this unique id twice; \"rank must be between 0 and nranks-1 and unique "
                                      "within a communicator clique\"");
  p->devices[size_t(rank)] = device;
  if (++p->joined == nranks) {
    if (find_duplicates(p->devices, &p->messages))
      p->result = ncclInvalidUsage;
    else
      p->clique = std::make_shared<Clique>(nranks, p->devices);
    p->done = true;
    t.open.erase(key);
    t.cv.notify_all();
  }
  *out = p;
  return ncclSuccess;
}

// NCCL: "ncclCommInitRank implicitly synchronizes with other ranks": blocks until all nranks
// joined. A rank still alone after VGPU_NCCL_INIT_TIMEOUT_S (default 120 s) is reported instead
// of hanging forever.
ncclResult_t init_wait(const std::shared_ptr<PendingInit>& p, int rank, ncclComm_t* comm) {
  InitTable& t = table();
  std::unique_lock lk(t.mu);
  const auto timeout = init_timeout();
  if (!t.cv.wait_for(lk, timeout, [&] { return p->done; })) {
    const int joined = p->joined;
    p->devices[size_t(rank)] = -1;  // leave, so a late rank does not complete a dead rendezvous
    if (--p->joined == 0) t.open.erase(p->key);
    lk.unlock();
    std::ostringstream m;
    m << "ncclCommInitRank: rank " << rank << " of " << p->nranks << " waited "
      << std::chrono::duration<double>(timeout).count() << " s for the other ranks to join its unique id; only "
      << joined << " of " << p->nranks
      << " did. NCCL: ncclCommInitRank \"implicitly synchronizes with other ranks\", so every rank must call it "
         "with the same id (VGPU_NCCL_INIT_TIMEOUT_S sets this wait).";
    report_violation("nccl init timeout", m.str());
    *comm = nullptr;
    return fail(ncclRemoteError, m.str());
  }
  if (p->result != ncclSuccess) {
    *comm = nullptr;
    return fail(p->result, p->messages[size_t(rank)]);
  }
  lk.unlock();
  *comm = new_comm(p->clique, rank);
  return ncclSuccess;
}

}  // namespace vgpu::nccl

using namespace vgpu::nccl;

// NCCL: "Creates a new communicator (multi thread/process version). rank must be between 0 and
// nranks-1 and unique within a communicator clique. Each rank is associated to a CUDA device,
// which has to be set before calling ncclCommInitRank."
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommInitRank: comm argument is NULL");
  if (vgpu::device_count() == 0) return fail(ncclUnhandledCudaError, "ncclCommInitRank: no CUDA device");
  if (nranks < 1)
    return fail(ncclInvalidArgument, "ncclCommInitRank: invalid nranks " + std::to_string(nranks) + " (must be >= 1)");
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                         " is not between 0 and nranks-1 (nranks " + std::to_string(nranks) + ")");
  std::shared_ptr<PendingInit> p;
  if (ncclResult_t r = init_join(commId, nranks, rank, vgpu::current_device(), &p); r != ncclSuccess) return r;
  if (in_group()) {  // NCCL: inside a group the call returns at once; ncclGroupEnd completes it
    defer_init(comm, std::move(p), rank);
    return ncclSuccess;
  }
  return init_wait(p, rank, comm);
}

// NCCL: "Creates a clique of communicators (single process version) in a blocking way ...
// comms should be pre-allocated with a size of at least ndev*sizeof(ncclComm_t). devlist defines
// the CUDA devices associated with each rank. If devlist is NULL, the first ndev CUDA devices are
// used, in order."
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms) return fail(ncclInvalidArgument, "ncclCommInitAll: comms argument is NULL");
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: invalid ndev " + std::to_string(ndev));
  const int count = vgpu::device_count();
  if (count == 0) return fail(ncclUnhandledCudaError, "ncclCommInitAll: no CUDA device");
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    devices[size_t(i)] = devlist ? devlist[i] : i;
    if (devices[size_t(i)] < 0 || devices[size_t(i)] >= count)
      return fail(ncclInvalidArgument, "ncclCommInitAll: invalid device " + std::to_string(devices[size_t(i)]) +
                                           " in devlist (" + std::to_string(count) + " devices)");
  }
  std::vector<std::string> messages(static_cast<size_t>(ndev));
  if (find_duplicates(devices, &messages)) return fail(ncclInvalidUsage, "ncclCommInitAll: " + messages[0]);
  auto clique = std::make_shared<Clique>(ndev, devices);
  for (int i = 0; i < ndev; ++i) comms[i] = new_comm(clique, i);
  return ncclSuccess;
}

// NCCL: "The ncclCommSplit function creates a set of new communicators from an existing one.
// Ranks which pass the same color value will be part of the same group; color must be a
// non-negative value. If it is passed as NCCL_SPLIT_NOCOLOR, it means that the rank will not be
// part of any group, therefore returning NULL as newcomm. The value of key will determine the
// rank order, and the smaller key means the smaller rank in new communicator. If keys are equal
// between ranks, then the rank in the original communicator will be used to order ranks."
// Blocking, as a collective over the parent's ranks. The config is accepted and ignored.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)config;
  Handle h;
  if (ncclResult_t r = lookup(comm, "ncclCommSplit", &h); r != ncclSuccess) return r;
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm argument is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument,
                "ncclCommSplit: color " + std::to_string(color) + " is neither non-negative nor NCCL_SPLIT_NOCOLOR");
  if (in_group())
    return fail(ncclInvalidUsage, "ncclCommSplit inside ncclGroupStart/ncclGroupEnd is not supported by the vgpu");
  Clique::SplitResult res;
  int arrived = 0;
  const auto timeout = std::chrono::milliseconds(int64_t(env_seconds("VGPU_NCCL_INIT_TIMEOUT_S", 120) * 1000));
  if (!h.clique->split(h.rank, color, key, timeout, &res, &arrived)) {
    std::ostringstream m;
    m << "ncclCommSplit: rank " << h.rank << " of " << h.nranks << " waited "
      << std::chrono::duration<double>(timeout).count() << " s for the other ranks of the parent communicator; only "
      << arrived << " of " << h.nranks
      << " called ncclCommSplit. It is a collective call: every rank of the parent must make it (with "
         "NCCL_SPLIT_NOCOLOR to stay out of every new communicator).";
    vgpu::report_violation("nccl split timeout", m.str());
    *newcomm = nullptr;
    return fail(ncclRemoteError, m.str());
  }
  *newcomm = res.clique ? new_comm(res.clique, res.rank) : nullptr;
  return ncclSuccess;
}
