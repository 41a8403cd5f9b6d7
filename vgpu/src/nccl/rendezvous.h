// The NCCL matching engine: one Clique per communicator matches its ranks' parts of each operation
// by issue order, runs it once all arrived, and lets a rank abort. No streams; unit-tested alone.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

// Standard headers first: vgpu/device.h (through cuda_runtime.h) defines CUDA's qualifier macros.
#include <nccl.h>
#include <vgpu/runtime.h>

namespace vgpu::nccl {

enum class Kind : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv };
const char* kind_name(Kind k);  // "ncclAllReduce", ...
bool is_p2p(Kind k);
bool has_redop(Kind k);  // AllReduce, Reduce, ReduceScatter
bool has_root(Kind k);   // Broadcast, Reduce

// One rank's part of one operation, as its stream item posts it.
struct Op {
  Kind kind = Kind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements: per rank for AllGather (sendcount) and ReduceScatter (recvcount)
  int dtype = ncclFloat32;
  int redop = ncclSum;
  int root = 0;                // Broadcast/Reduce: the root; Send/Recv: the peer
  uint64_t seq = 0;            // matching number (Clique::issue_*)
  const Site* site = nullptr;  // where it was called, for reports (may be null)
  bool done = false;           // set by the engine when the operation completed
};

// "ncclAllReduce(count 10, ncclFloat32, ncclSum)" and the like: the arguments that must agree.
std::string describe_args(const Op& op);

// What the engine calls to move data and to report; implemented by the API layer (and tests).
class Executor {
 public:
  virtual ~Executor() = default;
  // Every rank's part of one collective, parts[r] for rank r; their arguments agree.
  virtual void collective(const Op* const* parts, int nranks) = 0;
  // A send of rank src and the receive of rank dst that it matched; count and type agree.
  virtual void transfer(const Op& send, int src, const Op& recv, int dst) = 0;
  // The parts of one operation disagree. parts[i] belongs to rank ranks[i]; `reason` says what
  // differs. Returns the report's text. The engine then completes the parts without moving data
  // and sets every involved rank's asynchronous error to ncclInvalidUsage with that text.
  virtual std::string mismatch(const Op* const* parts, const int* ranks, int k, const std::string& reason) = 0;
};

class Clique {
 public:
  explicit Clique(int nranks, std::vector<int> devices = {});
  ~Clique();
  Clique(const Clique&) = delete;
  Clique& operator=(const Clique&) = delete;

  int size() const { return n_; }
  int device(int rank) const { return rank < int(devices_.size()) ? devices_[rank] : -1; }

  // Host side, when an operation is queued: its matching number. NCCL matches collectives by the
  // order each rank issues them on the communicator, and sends with receives by the order between
  // each pair of ranks ("Point-to-point communication": "count and datatype must match").
  uint64_t issue_collective(int rank);
  uint64_t issue_send(int rank, int peer);
  uint64_t issue_recv(int rank, int peer);

  // Worker side: posts the parts ops[0..n) of `rank` (one stream item) and waits, without
  // spinning, until every one completed or the rank is aborted. The thread whose post completes
  // an operation runs it through `ex`. Returns false if the rank was aborted: its unfinished parts
  // are withdrawn (the peers keep waiting, as they would on a GPU).
  bool run(int rank, Op* ops, size_t n, Executor& ex);

  // ncclCommAbort of `rank`: its waiting run returns, later runs return at once, and no operation
  // involving it executes any more. Returns once no execution touching its buffers is under way.
  void abort(int rank);
  bool aborted(int rank) const;

  // Operations of `rank` queued and not yet finished (ncclCommDestroy waits for them).
  void add_in_flight(int rank, int delta);
  int in_flight(int rank) const;
  // Waits until `rank` has nothing in flight. Gives up, returning false with the count left, once
  // `grace` passes without any operation of the clique completing.
  bool wait_idle(int rank, std::chrono::milliseconds grace, int* left);

  // Asynchronous error of a rank (ncclCommGetAsyncError); the first one stays.
  void set_error(int rank, ncclResult_t e, const std::string& message);
  ncclResult_t error(int rank, std::string* message = nullptr) const;

  // ncclCommSplit (host side, blocking): the k-th split call of every rank forms one exchange.
  // Ranks with the same colour form a new clique, ordered by key then by rank here; NOCOLOR gives
  // none. Returns false if not every rank arrived within `timeout` (then *arrived says how many).
  struct SplitResult {
    std::shared_ptr<Clique> clique;  // null for NCCL_SPLIT_NOCOLOR
    int rank = -1;                   // this rank's number in it
    std::vector<int> members;        // ranks here of the new clique's ranks, in its order
  };
  bool split(int rank, int color, int key, std::chrono::milliseconds timeout, SplitResult* out, int* arrived);

 private:
  struct Slot;
  struct Ring;
  struct Member;
  Ring& ring_for(const Op& op, int rank, int* part);
  void execute(Ring& ring, uint64_t seq, std::unique_lock<std::mutex>& lk, Executor& ex);
  void withdraw(int rank, Op* ops, size_t n, std::unique_lock<std::mutex>& lk);

  const int n_;
  const std::vector<int> devices_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Member> members_;
  uint64_t progress_ = 0;  // operations completed and stream items finished, clique-wide
  std::unique_ptr<Ring> coll_;
  std::vector<std::unique_ptr<Ring>> p2p_;  // [src * n + dst], made on first use
  struct SplitRound;
  std::map<uint64_t, std::unique_ptr<SplitRound>> splits_;  // open split exchanges, by round
};

}  // namespace vgpu::nccl
