// Shared state of one group of local ranks: a barrier with timeout and failure propagation,
// the slots where ranks publish their buffers, and the mailboxes for point-to-point messages.
#pragma once
#include <condition_variable>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace ptdp::local {

// State of a whole world of local ranks, shared by every group split from it: the messages
// between ranks and the world's failure (a failed rank fails every group).
class World {
 public:
  void post(int src, int dst, int tag, std::vector<char> data);
  // Waits for the oldest message src -> dst with this tag; CommError on timeout or failure.
  std::vector<char> take(int src, int dst, int tag, std::chrono::milliseconds timeout);
  void fail(const std::string& why);  // the first reason is kept
  std::string failure();               // empty while healthy

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> boxes_;
  std::string failure_;
};

struct Slot {
  const void* in = nullptr;
  void* out = nullptr;
  // This rank's reduced chunk, read by its peers. Owned by the group (not by the call), so a
  // rank that leaves a failed collective early frees nothing a peer may still be reading;
  // it grows and is reused across calls.
  std::vector<char> scratch;
  int64_t a = 0, b = 0;  // small integers some calls publish (split: color, key)
};

class Group {
 public:
  Group(std::vector<int> world_ranks, std::shared_ptr<World> world);
  int size() const { return static_cast<int>(world_ranks_.size()); }
  int world_rank(int r) const { return world_ranks_[r]; }
  const std::shared_ptr<World>& world() const { return world_; }
  Slot& slot(int r) { return slots_[r]; }

  // Waits until every rank of the group has called it with the same count; CommError naming
  // the ranks that did not arrive at `call` within the timeout, or when the group failed.
  // reads_follow: every rank reads its peers' slots after this barrier and calls end_read()
  // when done; a rank leaving a later barrier because of a failure first waits for those
  // readers, so that no memory a peer is reading goes away under it.
  void barrier(int rank, const char* call, uint64_t seq, std::chrono::milliseconds timeout,
               bool reads_follow = false);
  void end_read();
  void fail(const std::string& why);

  // For split: the group that ranks of `color` join in split number `seq`.
  std::shared_ptr<Group> child(uint64_t seq, int color, const std::vector<int>& members_world);
  void drop_children(uint64_t seq);

 private:
  std::vector<int> world_ranks_;
  std::shared_ptr<World> world_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  int readers_ = 0;  // ranks still reading peers' slots after a barrier with reads_follow
  std::vector<bool> here_;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<Group>> children_;
};

}  // namespace ptdp::local
