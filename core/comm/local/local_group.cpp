#include "core/comm/local/local_group.h"

#include <fmt/format.h>

#include "core/comm/communicator.h"

namespace ptdp::local {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(50);  // how often sleepers look at the world's failure
}

void World::post(int src, int dst, int tag, std::vector<char> data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    boxes_[{src, dst, tag}].push_back(std::move(data));
  }
  cv_.notify_all();
}

std::vector<char> World::take(int src, int dst, int tag, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!failure_.empty()) throw CommError(failure_);
    auto it = boxes_.find({src, dst, tag});
    if (it != boxes_.end() && !it->second.empty()) {
      std::vector<char> d = std::move(it->second.front());
      it->second.pop_front();
      return d;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string why = fmt::format("local comm: rank {} waited {:.1f} s for a message from rank {} (tag {}); "
                                    "rank {} did not send it",
                                    dst, timeout.count() / 1e3, src, tag, src);
      failure_ = why;
      cv_.notify_all();
      throw CommError(why);
    }
    cv_.wait_for(lock, kPoll);
  }
}

void World::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = why;
  }
  cv_.notify_all();
}

std::string World::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Group::Group(std::vector<int> world_ranks, std::shared_ptr<World> world)
    : world_ranks_(std::move(world_ranks)), world_(std::move(world)), slots_(world_ranks_.size()),
      here_(world_ranks_.size(), false) {}

void Group::fail(const std::string& why) {
  world_->fail(why);
  cv_.notify_all();
}

void Group::end_read() {
  std::lock_guard<std::mutex> lock(mu_);
  --readers_;
  cv_.notify_all();
}

void Group::barrier(int rank, const char* call, uint64_t seq, std::chrono::milliseconds timeout, bool reads_follow) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  here_[rank] = true;
  if (++arrived_ == size()) {
    arrived_ = 0;
    std::fill(here_.begin(), here_.end(), false);
    ++generation_;
    if (reads_follow) readers_ += size();  // counted before anyone leaves: no window
    cv_.notify_all();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Leaving with an error: peers that passed the previous barrier may still be reading this
  // rank's memory; wait for them (they do not block) before the caller frees anything.
  auto drain = [&] { cv_.wait_for(lock, timeout, [&] { return readers_ <= 0; }); };
  while (generation_ == gen) {
    std::string failed = world_->failure();
    if (!failed.empty()) {
      here_[rank] = false;
      --arrived_;
      drain();
      throw CommError(failed);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (int r = 0; r < size(); ++r)
        if (!here_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(world_ranks_[r]);
      std::string why = fmt::format("local comm: rank {} did not arrive at {} (call #{}) within {:.1f} s",
                                    missing, call, seq, timeout.count() / 1e3);
      world_->fail(why);
      cv_.notify_all();
      here_[rank] = false;
      --arrived_;
      drain();
      throw CommError(why);
    }
    cv_.wait_for(lock, kPoll);
  }
}

std::shared_ptr<Group> Group::child(uint64_t seq, int color, const std::vector<int>& members_world) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& g = children_[{seq, color}];
  if (!g) g = std::make_shared<Group>(members_world, world_);
  return g;
}

void Group::drop_children(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = children_.begin(); it != children_.end();)
    it = it->first.first == seq ? children_.erase(it) : std::next(it);
}

}  // namespace ptdp::local
