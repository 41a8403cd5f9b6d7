// NCCL groups and queuing: at the outermost ncclGroupEnd (each call alone is a group of one) a
// group's operations on one (communicator, stream) become ONE stream item that posts all, then waits.
#include <algorithm>

#include "nccl/comm.h"

namespace vgpu::nccl {
namespace {

// One stream item: a rank's operations of one group on one stream. Its operations count as in
// flight from the moment it is queued until the runtime drops it (run or not), for ncclCommDestroy.
struct Batch {
  Batch(std::shared_ptr<Clique> c, int r, int n) : clique(std::move(c)), rank(r), count(n) {
    clique->add_in_flight(rank, count);
  }
  ~Batch() { clique->add_in_flight(rank, -count); }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  std::shared_ptr<Clique> clique;
  int rank;
  int count;  // operations
  std::vector<Op> ops;
  std::vector<Site> sites;  // ops[i].site points at sites[i]
};

struct Call {  // one operation call waiting for the end of its group
  Handle handle;
  cudaStream_t stream;
  Op op;
  Buffer buffers[2];
  int nbuffers;
  Site site;
};

struct DeferredInit {
  ncclComm_t* out;
  std::shared_ptr<PendingInit> pending;
  int rank;
};

// NCCL: "ncclGroupStart ... All subsequent calls to NCCL until ncclGroupEnd will not block";
// groups nest per host thread and take effect at the outermost ncclGroupEnd.
struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess;  // first error of a call inside the group
  std::vector<Call> calls;
  std::vector<DeferredInit> inits;
};
GroupState& group() {
  thread_local GroupState g;
  return g;
}

// Queues the calls calls[idx[...]], all of one communicator rank and one stream, as one item.
void queue_item(std::vector<Call>& calls, const std::vector<size_t>& idx) {
  Call& first = calls[idx[0]];
  auto batch = std::make_shared<Batch>(first.handle.clique, first.handle.rank, int(idx.size()));
  batch->ops.reserve(idx.size());
  batch->sites.reserve(idx.size());
  std::vector<Range> ranges;
  std::string names;
  for (size_t i : idx) {
    Call& c = calls[i];
    const Op& op = c.op;
    for (int b = 0; b < c.nbuffers; ++b)
      if (c.buffers[b].bytes) ranges.push_back(Range{c.buffers[b].ptr, c.buffers[b].bytes, c.buffers[b].access});
    if (idx.size() > 1) names += std::string(names.empty() ? "" : ", ") + kind_name(op.kind);
    batch->ops.push_back(op);
    batch->sites.push_back(idx.size() == 1 ? c.site : std::move(c.site));
  }
  for (size_t i = 0; i < batch->ops.size(); ++i) batch->ops[i].site = &batch->sites[i];
  Site site = idx.size() == 1
                  ? std::move(first.site)
                  : capture_site("ncclGroupEnd (" + std::to_string(idx.size()) + " operations: " + names + ")");
  enqueue(first.stream, std::move(site), std::move(ranges), [batch]() -> cudaError_t {
    if (!batch->clique->aborted(batch->rank))
      batch->clique->run(batch->rank, batch->ops.data(), batch->ops.size(), device_executor());
    return cudaSuccess;
  });
}

// Gives each call its matching number, in call order (the order NCCL matches by).
void issue(Call& c) {
  Clique& q = *c.handle.clique;
  if (c.op.kind == Kind::Send)
    c.op.seq = q.issue_send(c.handle.rank, c.op.root);
  else if (c.op.kind == Kind::Recv)
    c.op.seq = q.issue_recv(c.handle.rank, c.op.root);
  else
    c.op.seq = q.issue_collective(c.handle.rank);
}

// Splits the calls by (communicator, stream), keeping each one's order, and queues each part.
void flush(std::vector<Call>& calls) {
  for (Call& c : calls) issue(c);
  std::vector<bool> taken(calls.size(), false);
  std::vector<size_t> idx;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (taken[i]) continue;
    idx.clear();
    for (size_t j = i; j < calls.size(); ++j)
      if (!taken[j] && calls[j].handle.comm == calls[i].handle.comm && calls[j].stream == calls[i].stream) {
        taken[j] = true;
        idx.push_back(j);
      }
    queue_item(calls, idx);
  }
}

}  // namespace

bool in_group() { return group().depth > 0; }

void defer_init(ncclComm_t* out, std::shared_ptr<PendingInit> p, int rank) {
  group().inits.push_back(DeferredInit{out, std::move(p), rank});
}

ncclResult_t submit(const Handle& h, cudaStream_t stream, const Op& op, const Buffer* buffers, int nbuffers,
                    Site site) {
  GroupState& g = group();
  Call c{h, stream, op, {}, nbuffers, std::move(site)};
  for (int i = 0; i < nbuffers; ++i) c.buffers[i] = buffers[i];
  if (g.depth > 0) {
    g.calls.push_back(std::move(c));
    return ncclSuccess;
  }
  thread_local std::vector<Call> one;
  one.clear();
  one.push_back(std::move(c));
  issue(one[0]);
  thread_local std::vector<size_t> idx{0};
  queue_item(one, idx);
  one.clear();
  return ncclSuccess;
}

// Records an error of a call made inside a group: NCCL then fails the whole group at
// ncclGroupEnd, which returns the error and launches none of its operations.
ncclResult_t group_error(ncclResult_t e) {
  GroupState& g = group();
  if (g.depth > 0 && g.error == ncclSuccess) g.error = e;
  return e;
}

}  // namespace vgpu::nccl

using namespace vgpu::nccl;

ncclResult_t ncclGroupStart(void) {
  ++group().depth;
  return ncclSuccess;
}

// NCCL: "ncclGroupEnd: End a group call. Returns when all operations since ncclGroupStart have
// been processed. This means the communication primitives have been enqueued to the provided
// streams, but are not necessarily complete." Point-to-point operations that must progress
// together have to be in one group ("If multiple ncclSend() and ncclRecv() operations need to
// progress concurrently to complete, they must be fused within a ncclGroupStart()/ncclGroupEnd()
// section"): here they are one stream item, posted together.
ncclResult_t ncclGroupEnd(void) {
  GroupState& g = group();
  if (g.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart on this thread");
  if (--g.depth > 0) return ncclSuccess;
  std::vector<Call> calls = std::move(g.calls);
  std::vector<DeferredInit> inits = std::move(g.inits);
  const ncclResult_t error = g.error;
  g.calls.clear();
  g.inits.clear();
  g.error = ncclSuccess;
  if (error != ncclSuccess) {
    // The failing call already set the last-error text; the group's other operations are dropped.
    for (DeferredInit& d : inits) *d.out = nullptr;
    return error;
  }
  flush(calls);
  ncclResult_t result = ncclSuccess;
  for (DeferredInit& d : inits) {
    const ncclResult_t r = init_wait(d.pending, d.rank, d.out);
    if (result == ncclSuccess) result = r;
  }
  return result;
}
