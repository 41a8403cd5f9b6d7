// The NCCL matching engine: one Clique per communicator matches its ranks' parts of each operation
// and runs it once all arrived; blocked workers wait on the clique's condition variable.
#include "nccl/rendezvous.h"

#include <algorithm>
#include <numeric>

#include "nccl/reduce.h"

namespace vgpu::nccl {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce:
      return "ncclAllReduce";
    case Kind::Broadcast:
      return "ncclBroadcast";
    case Kind::Reduce:
      return "ncclReduce";
    case Kind::AllGather:
      return "ncclAllGather";
    case Kind::ReduceScatter:
      return "ncclReduceScatter";
    case Kind::Send:
      return "ncclSend";
    case Kind::Recv:
      return "ncclRecv";
  }
  return "?";
}
bool is_p2p(Kind k) { return k == Kind::Send || k == Kind::Recv; }
bool has_redop(Kind k) { return k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter; }
bool has_root(Kind k) { return k == Kind::Broadcast || k == Kind::Reduce; }

std::string describe_args(const Op& op) {
  std::string s = std::string(kind_name(op.kind)) + "(";
  s += op.kind == Kind::AllGather ? "sendcount " : op.kind == Kind::ReduceScatter ? "recvcount " : "count ";
  s += std::to_string(op.count) + ", " + dtype_name(op.dtype);
  if (has_redop(op.kind)) s += std::string(", ") + redop_name(op.redop);
  if (has_root(op.kind)) s += ", root " + std::to_string(op.root);
  if (is_p2p(op.kind)) s += ", peer " + std::to_string(op.root);
  return s + ")";
}

namespace {

// Why the parts of one operation disagree; empty when they agree. NCCL requires every rank of a
// collective to pass the same operation, count, datatype, op and root ("Collective Operations":
// each rank must call the same collective with matching arguments) and a receive to have "the
// same datatype and the same count" as its send ("ncclSend" / "ncclRecv").
std::string disagreement(const Op* const* parts, int k) {
  std::string why;
  auto add = [&](const char* what) { why += why.empty() ? what : std::string(", ") + what; };
  const Op& a = *parts[0];
  bool kind = false, count = false, dtype = false, redop = false, root = false;
  for (int i = 1; i < k; ++i) {
    const Op& b = *parts[i];
    if (is_p2p(a.kind)) {
      count |= a.count != b.count;
      dtype |= a.dtype != b.dtype;
      continue;
    }
    kind |= a.kind != b.kind;
    count |= a.count != b.count;
    dtype |= a.dtype != b.dtype;
    redop |= has_redop(a.kind) && has_redop(b.kind) && a.redop != b.redop;
    root |= has_root(a.kind) && has_root(b.kind) && a.root != b.root;
  }
  if (kind) add("the collectives differ");
  if (count) add("the counts differ");
  if (dtype) add("the datatypes differ");
  if (redop) add("the reduction ops differ");
  if (root) add("the roots differ");
  return why;
}

}  // namespace

// ---- Slots and rings: the operations being matched, by matching number.

struct Clique::Slot {
  std::vector<Op*> parts;  // by part index; null until posted
  int arrived = 0;
  bool executing = false;
  bool done = false;
};

// The slots of one matching sequence (the collectives, or the sends from one rank to another):
// slot of number s at s mod capacity, for s in [base, base + capacity); grows when a rank runs
// ahead. Slots keep their part vectors, so matching allocates nothing in the steady state.
struct Clique::Ring {
  Ring(std::vector<int> part_ranks) : k(int(part_ranks.size())), ranks(std::move(part_ranks)) { resize(16); }
  int k;
  std::vector<int> ranks;  // the clique rank that posts each part
  std::vector<Slot> slots;
  uint64_t base = 0;

  Slot& at(uint64_t seq) {
    if (seq >= base + slots.size()) {
      size_t cap = slots.size();
      while (seq >= base + cap) cap *= 2;
      std::vector<Slot> next(cap);
      for (uint64_t s = base; s < base + slots.size(); ++s)
        next[s & (cap - 1)] = std::move(slots[s & (slots.size() - 1)]);
      slots.swap(next);
      for (Slot& s : slots)
        if (s.parts.empty()) s.parts.assign(size_t(k), nullptr);
    }
    return slots[seq & (slots.size() - 1)];
  }
  void resize(size_t cap) {
    slots.resize(cap);
    for (Slot& s : slots) s.parts.assign(size_t(k), nullptr);
  }
  void complete(uint64_t seq) {
    at(seq).done = true;
    for (;;) {
      Slot& s = slots[base & (slots.size() - 1)];
      if (!s.done) break;
      std::fill(s.parts.begin(), s.parts.end(), nullptr);
      s.arrived = 0;
      s.executing = s.done = false;
      ++base;
    }
  }
};

struct Clique::Member {
  bool aborted = false;
  int executing = 0;  // executions under way that touch this rank's buffers
  int in_flight = 0;  // operations queued, not finished
  uint64_t coll_issued = 0;
  std::vector<uint64_t> sends_issued, recvs_issued;  // by peer
  uint64_t split_calls = 0;
  ncclResult_t error = ncclSuccess;
  std::string message;
};

struct Clique::SplitRound {
  explicit SplitRound(int n) : color(size_t(n)), key(size_t(n)), results(size_t(n)) {}
  std::vector<int> color, key;
  int arrived = 0, taken = 0;
  bool done = false;
  std::vector<SplitResult> results;
};

Clique::Clique(int nranks, std::vector<int> devices)
    : n_(nranks), devices_(std::move(devices)), members_(size_t(nranks)), p2p_(size_t(nranks) * size_t(nranks)) {
  std::vector<int> all(static_cast<size_t>(nranks));
  std::iota(all.begin(), all.end(), 0);
  coll_ = std::make_unique<Ring>(all);
  for (Member& m : members_) {
    m.sends_issued.assign(size_t(nranks), 0);
    m.recvs_issued.assign(size_t(nranks), 0);
  }
}

Clique::~Clique() = default;

uint64_t Clique::issue_collective(int rank) {
  std::lock_guard lk(mu_);
  return members_[rank].coll_issued++;
}
uint64_t Clique::issue_send(int rank, int peer) {
  std::lock_guard lk(mu_);
  return members_[rank].sends_issued[peer]++;
}
uint64_t Clique::issue_recv(int rank, int peer) {
  std::lock_guard lk(mu_);
  return members_[rank].recvs_issued[peer]++;
}

Clique::Ring& Clique::ring_for(const Op& op, int rank, int* part) {
  if (!is_p2p(op.kind)) {
    *part = rank;
    return *coll_;
  }
  const int src = op.kind == Kind::Send ? rank : op.root;
  const int dst = op.kind == Kind::Send ? op.root : rank;
  *part = op.kind == Kind::Send ? 0 : 1;
  std::unique_ptr<Ring>& r = p2p_[size_t(src) * size_t(n_) + size_t(dst)];
  if (!r) r = std::make_unique<Ring>(std::vector<int>{src, dst});
  return *r;
}

bool Clique::run(int rank, Op* ops, size_t n, Executor& ex) {
  std::unique_lock lk(mu_);
  Member& me = members_[rank];
  for (size_t i = 0; i < n && !me.aborted; ++i) {
    Op& op = ops[i];
    op.done = false;
    int part = 0;
    Ring& ring = ring_for(op, rank, &part);
    Slot& slot = ring.at(op.seq);
    slot.parts[size_t(part)] = &op;
    if (++slot.arrived == ring.k) execute(ring, op.seq, lk, ex);
  }
  for (;;) {
    if (me.aborted) {
      withdraw(rank, ops, n, lk);
      return false;
    }
    if (std::all_of(ops, ops + n, [](const Op& o) { return o.done; })) return true;
    cv_.wait(lk);
  }
}

// Runs the operation of number `seq` of `ring`, all of whose parts arrived, unless a rank it
// involves was aborted (then it stays pending, as a GPU kernel waiting for a dead peer would).
// The data moves with the lock released; the parts cannot go away meanwhile (their ranks' runs
// wait for them, and a withdrawal or abort waits for executions to end).
void Clique::execute(Ring& ring, uint64_t seq, std::unique_lock<std::mutex>& lk, Executor& ex) {
  Slot& slot = ring.at(seq);
  for (int i = 0; i < ring.k; ++i)
    if (members_[ring.ranks[i]].aborted) return;
  slot.executing = true;
  thread_local std::vector<Op*> parts;
  parts.assign(slot.parts.begin(), slot.parts.end());
  for (int i = 0; i < ring.k; ++i) ++members_[ring.ranks[i]].executing;
  lk.unlock();
  const std::string why = disagreement(parts.data(), ring.k);
  std::string message;
  try {
    if (!why.empty())
      message = ex.mismatch(parts.data(), ring.ranks.data(), ring.k, why);
    else if (is_p2p(parts[0]->kind))
      ex.transfer(*parts[0], ring.ranks[0], *parts[1], ring.ranks[1]);
    else
      ex.collective(parts.data(), ring.k);
  } catch (...) {
    // An executor must not throw; if one does, the operation still completes so nobody hangs.
  }
  lk.lock();
  for (int i = 0; i < ring.k; ++i) {
    Member& m = members_[ring.ranks[i]];
    parts[size_t(i)]->done = true;
    --m.executing;
    if (!why.empty() && m.error == ncclSuccess) {
      m.error = ncclInvalidUsage;
      m.message = !message.empty() ? message : std::string(kind_name(parts[0]->kind)) + ": " + why;
    }
  }
  ring.complete(seq);
  ++progress_;
  cv_.notify_all();
}

void Clique::withdraw(int rank, Op* ops, size_t n, std::unique_lock<std::mutex>& lk) {
  for (size_t i = 0; i < n; ++i) {
    Op& op = ops[i];
    for (;;) {
      if (op.done) break;
      int part = 0;
      Ring& ring = ring_for(op, rank, &part);
      if (op.seq < ring.base) break;
      Slot& s = ring.at(op.seq);
      if (s.parts[size_t(part)] != &op) break;  // never posted
      if (s.executing) {                        // started before the abort: let it finish
        cv_.wait(lk);
        continue;
      }
      s.parts[size_t(part)] = nullptr;
      --s.arrived;
      break;
    }
  }
}

void Clique::abort(int rank) {
  std::unique_lock lk(mu_);
  Member& me = members_[rank];
  me.aborted = true;
  cv_.notify_all();
  cv_.wait(lk, [&] { return me.executing == 0; });
}

bool Clique::aborted(int rank) const {
  std::lock_guard lk(mu_);
  return members_[rank].aborted;
}

void Clique::add_in_flight(int rank, int delta) {
  std::lock_guard lk(mu_);
  members_[rank].in_flight += delta;
  if (delta < 0) {
    ++progress_;
    cv_.notify_all();
  }
}

int Clique::in_flight(int rank) const {
  std::lock_guard lk(mu_);
  return members_[rank].in_flight;
}

bool Clique::wait_idle(int rank, std::chrono::milliseconds grace, int* left) {
  std::unique_lock lk(mu_);
  Member& me = members_[rank];
  uint64_t seen = progress_;
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (me.in_flight > 0) {
    const bool timed_out = cv_.wait_until(lk, deadline) == std::cv_status::timeout;
    if (progress_ != seen) {  // the clique moves: grant a fresh grace period
      seen = progress_;
      deadline = std::chrono::steady_clock::now() + grace;
    } else if (timed_out && me.in_flight > 0) {
      if (left) *left = me.in_flight;
      return false;
    }
  }
  return true;
}

void Clique::set_error(int rank, ncclResult_t e, const std::string& message) {
  std::lock_guard lk(mu_);
  Member& m = members_[rank];
  if (m.error != ncclSuccess) return;
  m.error = e;
  m.message = message;
}

ncclResult_t Clique::error(int rank, std::string* message) const {
  std::lock_guard lk(mu_);
  if (message) *message = members_[rank].message;
  return members_[rank].error;
}

bool Clique::split(int rank, int color, int key, std::chrono::milliseconds timeout, SplitResult* out, int* arrived) {
  std::unique_lock lk(mu_);
  const uint64_t round = members_[rank].split_calls++;
  std::unique_ptr<SplitRound>& slot = splits_[round];
  if (!slot) slot = std::make_unique<SplitRound>(n_);
  SplitRound* r = slot.get();
  r->color[size_t(rank)] = color;
  r->key[size_t(rank)] = key;
  if (++r->arrived == n_) {
    // "Ranks which pass the same color value will be part of the same group ... the smaller key
    // means the smaller rank in the new communicator; equal keys keep the original rank order;
    // NCCL_SPLIT_NOCOLOR ... returning NULL as newcomm" (ncclCommSplit).
    std::vector<int> order(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (r->color[size_t(a)] != r->color[size_t(b)]) return r->color[size_t(a)] < r->color[size_t(b)];
      return r->key[size_t(a)] < r->key[size_t(b)];
    });
    for (size_t begin = 0; begin < order.size();) {
      const int c = r->color[size_t(order[begin])];
      size_t end = begin;
      while (end < order.size() && r->color[size_t(order[end])] == c) ++end;
      if (c != NCCL_SPLIT_NOCOLOR) {
        std::vector<int> members(order.begin() + long(begin), order.begin() + long(end));
        std::vector<int> devices;
        for (int m : members) devices.push_back(device(m));
        auto clique = std::make_shared<Clique>(int(members.size()), devices);
        for (size_t i = 0; i < members.size(); ++i) r->results[size_t(members[i])] = {clique, int(i), members};
      }
      begin = end;
    }
    r->done = true;
    cv_.notify_all();
  } else if (!cv_.wait_for(lk, timeout, [&] { return r->done; })) {
    if (arrived) *arrived = r->arrived;
    return false;
  }
  *out = std::move(r->results[size_t(rank)]);
  if (++r->taken == n_) splits_.erase(round);
  return true;
}

}  // namespace vgpu::nccl
