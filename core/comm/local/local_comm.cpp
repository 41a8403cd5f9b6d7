#include "core/comm/local/local_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "core/comm/local/local_group.h"

namespace ptdp {

namespace {

using local::Group;
using local::World;

template <class T>
void reduce_into(T* dst, const std::vector<const T*>& srcs, int64_t begin, int64_t end, ReduceOp op) {
  for (int64_t i = begin; i < end; ++i) {
    T acc = srcs[0][i];
    for (size_t q = 1; q < srcs.size(); ++q) acc = op == ReduceOp::Sum ? acc + srcs[q][i] : std::max(acc, srcs[q][i]);
    dst[i - begin] = acc;
  }
}

// bf16/f16: accumulated in f32 in rank order, rounded once.
template <class H, float (*Widen)(H), H (*Narrow)(float)>
void reduce_into_16(H* dst, const std::vector<const H*>& srcs, int64_t begin, int64_t end, ReduceOp op) {
  for (int64_t i = begin; i < end; ++i) {
    float acc = Widen(srcs[0][i]);
    for (size_t q = 1; q < srcs.size(); ++q) {
      const float x = Widen(srcs[q][i]);
      acc = op == ReduceOp::Sum ? acc + x : std::max(acc, x);
    }
    dst[i - begin] = Narrow(acc);
  }
}

// Reduces elements [begin, end) of every rank's input into dst, in rank order.
void reduce_chunk(Group& g, DType dt, void* dst, int64_t begin, int64_t end, ReduceOp op) {
  auto inputs = [&](auto zero) {
    using T = decltype(zero);
    std::vector<const T*> srcs(g.size());
    for (int q = 0; q < g.size(); ++q) srcs[q] = static_cast<const T*>(g.slot(q).in);
    return srcs;
  };
  switch (dt) {
    case DType::F32: reduce_into(static_cast<float*>(dst), inputs(float{}), begin, end, op); break;
    case DType::F64: reduce_into(static_cast<double*>(dst), inputs(double{}), begin, end, op); break;
    case DType::I32: reduce_into(static_cast<int32_t*>(dst), inputs(int32_t{}), begin, end, op); break;
    case DType::BF16:
      reduce_into_16<bf16, bf16_to_float, float_to_bf16>(static_cast<bf16*>(dst), inputs(bf16{}), begin, end, op);
      break;
    case DType::F16:
      reduce_into_16<f16, f16_to_float, float_to_f16>(static_cast<f16*>(dst), inputs(f16{}), begin, end, op);
      break;
  }
}

class LocalComm final : public Communicator {
 public:
  LocalComm(std::shared_ptr<Group> g, int rank, std::chrono::milliseconds timeout) : g_(std::move(g)), rank_(rank) {
    timeout_ = timeout;
  }
  ~LocalComm() override {
    {
      std::lock_guard<std::mutex> lock(qmu_);
      stop_ = true;
    }
    qcv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return g_->size(); }
  std::string backend() const override { return "local"; }

  void all_reduce(Tensor& x, ReduceOp op) override { start_all_reduce(x, op, /*caller_waits=*/true).wait(); }
  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override { return start_all_reduce(x, op, false); }

  CommHandle start_all_reduce(Tensor& x, ReduceOp op, bool caller_waits) {
    check_collective_args("all_reduce", x, nullptr, 0);
    return enqueue("all_reduce", caller_waits, [this, x, op]() mutable {
      const int64_t n = x.numel();
      const size_t es = dtype_size(x.dtype());
      ChunkRange mine = chunk_range(n, size(), rank_);
      // After a failure a peer may still be reading this rank's scratch from the call that
      // failed: stop before resizing it.
      if (std::string why = g_->world()->failure(); !why.empty()) throw CommError(why);
      std::vector<char>& scratch = g_->slot(rank_).scratch;
      if (scratch.size() < mine.size() * es) scratch.resize(mine.size() * es);
      g_->slot(rank_).in = x.raw();
      {
        ReadPhase r = sync_then_read("all_reduce");
        reduce_chunk(*g_, x.dtype(), scratch.data(), mine.begin, mine.end, op);
      }
      {
        ReadPhase r = sync_then_read("all_reduce");
        for (int q = 0; q < size(); ++q) {
          ChunkRange c = chunk_range(n, size(), q);
          if (c.size() > 0)  // an empty chunk's buffer may be empty
            std::memcpy(static_cast<char*>(x.raw()) + c.begin * es, g_->slot(q).scratch.data(), c.size() * es);
        }
      }
      sync("all_reduce");
    });
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    const int64_t n = out.numel();
    check_collective_args("all_gather", in, &out, n);
    PTDP_CHECK(in.numel() == chunk_range(n, size(), rank_).size(), "all_gather: input is not this rank's chunk");
    enqueue("all_gather", true, [this, in, out]() mutable {
      const size_t es = dtype_size(in.dtype());
      g_->slot(rank_).in = in.raw();
      {
        ReadPhase r = sync_then_read("all_gather");
        for (int q = 0; q < size(); ++q) {
          ChunkRange c = chunk_range(out.numel(), size(), q);
          if (c.size() > 0) std::memcpy(static_cast<char*>(out.raw()) + c.begin * es, g_->slot(q).in, c.size() * es);
        }
      }
      sync("all_gather");
    }).wait();
  }

  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    start_reduce_scatter(in, out, op, /*caller_waits=*/true).wait();
  }
  CommHandle reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    return start_reduce_scatter(in, out, op, false);
  }

  CommHandle start_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, bool caller_waits) {
    ChunkRange mine = chunk_range(in.numel(), size(), rank_);
    check_collective_args("reduce_scatter", in, &out, mine.size());
    return enqueue("reduce_scatter", caller_waits, [this, in, out, op, mine]() mutable {
      g_->slot(rank_).in = in.raw();
      {
        ReadPhase r = sync_then_read("reduce_scatter");
        reduce_chunk(*g_, in.dtype(), out.raw(), mine.begin, mine.end, op);
      }
      sync("reduce_scatter");
    });
  }

  void broadcast(Tensor& x, int root) override {
    PTDP_CHECK(root >= 0 && root < size(), "broadcast: root {} outside the group of {}", root, size());
    enqueue("broadcast", true, [this, x, root]() mutable {
      g_->slot(rank_).in = x.raw();
      {
        ReadPhase r = sync_then_read("broadcast");
        if (rank_ != root && x.nbytes() > 0) std::memcpy(x.raw(), g_->slot(root).in, x.nbytes());
      }
      sync("broadcast");
    }).wait();
  }

  void barrier() override {
    enqueue("barrier", true, [this] { sync("barrier"); }).wait();
  }

  void abort(const std::string& why) override {
    g_->fail(fmt::format("local comm: rank {} stopped: {}", g_->world_rank(rank_), why));
  }

  void send(const Tensor& x, int peer, int tag) override { isend(x, peer, tag).wait(); }
  void recv(Tensor& x, int peer, int tag) override { irecv(x, peer, tag).wait(); }

  CommHandle isend(const Tensor& x, int peer, int tag) override {
    check_peer(peer);
    const char* p = static_cast<const char*>(x.raw());
    g_->world()->post(g_->world_rank(rank_), g_->world_rank(peer), tag, std::vector<char>(p, p + x.nbytes()));
    return CommHandle();  // the message was copied: done
  }

  CommHandle irecv(Tensor& x, int peer, int tag) override {
    check_peer(peer);
    return CommHandle([this, x, peer, tag]() mutable {
      std::vector<char> d = g_->world()->take(g_->world_rank(peer), g_->world_rank(rank_), tag, timeout_);
      if (d.size() != x.nbytes())
        throw CommError(fmt::format("local comm: rank {} expected {} bytes from rank {} (tag {}), got {}",
                                    g_->world_rank(rank_), x.nbytes(), g_->world_rank(peer), tag, d.size()));
      if (!d.empty()) std::memcpy(x.raw(), d.data(), d.size());
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    std::shared_ptr<Group> child;
    int child_rank = 0;
    enqueue("split", true, [&, this] {
      const uint64_t id = seq_;
      g_->slot(rank_).a = color;
      g_->slot(rank_).b = key;
      sync("split");
      std::vector<std::pair<int64_t, int>> members;  // (key, parent rank) of my color
      for (int q = 0; q < size(); ++q)
        if (g_->slot(q).a == color) members.push_back({g_->slot(q).b, q});
      std::sort(members.begin(), members.end());
      std::vector<int> world;
      for (size_t i = 0; i < members.size(); ++i) {
        world.push_back(g_->world_rank(members[i].second));
        if (members[i].second == rank_) child_rank = static_cast<int>(i);
      }
      child = g_->child(id, color, world);
      sync("split");
      if (rank_ == 0) g_->drop_children(id);
    }).wait();
    return std::make_unique<LocalComm>(child, child_rank, timeout_);
  }

 private:
  void check_peer(int peer) const {
    PTDP_CHECK(peer >= 0 && peer < size() && peer != rank_, "p2p peer {} invalid for rank {} of {}", peer, rank_,
               size());
  }

  void sync(const char* call) { g_->barrier(rank_, call, seq_, timeout_); }

  // A barrier after which this rank reads its peers' memory; the phase ends with this object.
  class ReadPhase {
   public:
    explicit ReadPhase(Group* g) : g_(g) {}
    ReadPhase(const ReadPhase&) = delete;
    ReadPhase& operator=(const ReadPhase&) = delete;
    ~ReadPhase() { g_->end_read(); }

   private:
    Group* g_;
  };
  ReadPhase sync_then_read(const char* call) {
    g_->barrier(rank_, call, seq_, timeout_, /*reads_follow=*/true);
    return ReadPhase(g_.get());
  }

  // Runs collectives one at a time, in call order, on this rank's worker thread; one the caller
  // waits for, with nothing queued or running before it, on the calling thread (no hand-off).
  CommHandle enqueue(const char* call, bool caller_waits, std::function<void()> fn) {
    auto job = [this, call, fn = std::move(fn)] {
      ++seq_;
      try {
        fn();
      } catch (const CommError&) {
        throw;
      } catch (const std::exception& e) {
        g_->fail(fmt::format("local comm: rank {} failed in {}: {}", g_->world_rank(rank_), call, e.what()));
        throw;
      }
    };
    if (caller_waits) {
      std::unique_lock<std::mutex> lock(qmu_);
      if (queue_.empty() && !running_) {
        running_ = true;
        lock.unlock();
        struct Idle {  // also when the collective throws
          LocalComm* c;
          ~Idle() {
            std::lock_guard<std::mutex> l(c->qmu_);
            c->running_ = false;
            c->qcv_.notify_all();
          }
        } idle{this};
        job();
        return CommHandle();
      }
    }
    auto task = std::make_shared<std::packaged_task<void()>>(std::move(job));
    std::shared_future<void> done = task->get_future().share();
    {
      std::lock_guard<std::mutex> lock(qmu_);
      queue_.push_back([task] { (*task)(); });
      if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
    }
    qcv_.notify_one();
    return CommHandle([done] { done.get(); });
  }

  void work() {
    std::unique_lock<std::mutex> lock(qmu_);
    for (;;) {
      qcv_.wait(lock, [this] { return stop_ || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      job();
      lock.lock();
      running_ = false;
    }
  }

  std::shared_ptr<Group> g_;
  int rank_;
  uint64_t seq_ = 0;
  std::mutex qmu_;
  std::condition_variable qcv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  bool running_ = false;  // a collective is running (on the worker or the calling thread)
  std::thread worker_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_world(int n, std::chrono::milliseconds timeout) {
  PTDP_CHECK(n >= 1, "a world needs at least one rank");
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto g = std::make_shared<Group>(ranks, std::make_shared<World>());
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < n; ++i) comms.push_back(std::make_unique<LocalComm>(g, i, timeout));
  return comms;
}

void run_local_ranks(int n, const std::function<void(int, Communicator&)>& fn, std::chrono::milliseconds timeout) {
  auto comms = make_local_world(n, timeout);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    try {
      threads.emplace_back([&, r] {
        try {
          fn(r, *comms[r]);
        } catch (const std::exception& e) {
          errors[r] = std::current_exception();
          comms[r]->abort(e.what());
        } catch (...) {
          errors[r] = std::current_exception();
          comms[r]->abort("unknown error");
        }
      });
    } catch (const std::system_error& e) {  // out of threads or memory for their stacks
      const std::string why = fmt::format("cannot start {} local ranks as threads: rank {} failed to start ({}); use "
                                          "fewer ranks, or MPI processes (--comm mpi)",
                                          n, r, e.what());
      for (int i = 0; i < r; ++i) comms[i]->abort(why);
      for (auto& t : threads) t.join();
      throw RuntimeError(why);
    }
  }
  for (auto& t : threads) t.join();
  // Prefer the root cause: a rank's own failure over the CommErrors it caused in the others.
  std::exception_ptr first;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CommError&) {
      if (!first) first = e;
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace ptdp
