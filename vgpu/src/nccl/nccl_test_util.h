// Helpers of the NCCL subset's tests: thread ranks (one virtual GPU and stream each) joined by
// ncclCommInitRank, device buffers, and waits that give up at a deadline instead of hanging.
#pragma once
#include <gtest/gtest.h>
#include <nccl.h>
#include <vgpu/runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nccl_test {

using namespace std::chrono_literals;

// Runs fn(rank) on n host threads. If they are not all done within `limit`, the process is
// aborted with a message: a test can fail but never hang.
inline void on_threads(int n, const std::function<void(int)>& fn, std::chrono::seconds limit = 60s) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
  };
  auto st = std::make_shared<State>();
  for (int r = 0; r < n; ++r)
    std::thread([st, &fn, r] {
      fn(r);
      std::lock_guard lk(st->mu);
      ++st->done;
      st->cv.notify_all();
    }).detach();
  std::unique_lock lk(st->mu);
  if (!st->cv.wait_for(lk, limit, [&] { return st->done == n; })) {
    std::fprintf(stderr, "nccl test: %d of %d rank threads still running after %lld s: hung\n", n - st->done, n,
                 static_cast<long long>(limit.count()));
    std::abort();
  }
}

// While one exists, the test must finish within `limit`, else the process is aborted with a
// message (for tests whose own thread may block: stream synchronisation, destroy, joins).
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit = 60s) : st_(std::make_shared<State>()) {
    std::thread([st = st_, limit] {
      std::unique_lock lk(st->mu);
      if (!st->cv.wait_for(lk, limit, [&] { return st->cancelled; })) {
        std::fprintf(stderr, "nccl test: still running after %lld s: hung\n", static_cast<long long>(limit.count()));
        std::abort();
      }
    }).detach();
  }
  ~Watchdog() {
    std::lock_guard lk(st_->mu);
    st_->cancelled = true;
    st_->cv.notify_all();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool cancelled = false;
  };
  std::shared_ptr<State> st_;
};

// A rank: its device, a blocking stream on it, and its communicator.
struct Rank {
  int rank = 0;
  int device = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
};

// n thread ranks, rank r on device r, joined with ncclCommInitRank; fn runs on each. Streams are
// destroyed and communicators destroyed (unless fn freed them and set comm to null) at the end.
inline void with_ranks(int n, const std::function<void(Rank&)>& fn) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  on_threads(n, [&](int r) {
    Rank k;
    k.rank = r;
    k.device = r;
    EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
    EXPECT_EQ(cudaStreamCreate(&k.stream), cudaSuccess);
    EXPECT_EQ(ncclCommInitRank(&k.comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
    if (k.comm) fn(k);
    EXPECT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    if (k.comm) EXPECT_EQ(ncclCommDestroy(k.comm), ncclSuccess);
    EXPECT_EQ(cudaStreamDestroy(k.stream), cudaSuccess);
  });
}

// Device memory holding `values` (of T), on the calling thread's current device. A copy from
// pageable memory may return before it reaches the device, so the legacy stream is synchronised
// before any other stream uses the buffer.
template <class T>
T* device_copy(const std::vector<T>& values) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// Polls the event until it completes (true) or `limit` passes (false).
inline bool wait_event(cudaEvent_t ev, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool ok = false;
  for (;;) {
    const cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) {
      ok = true;
      break;
    }
    EXPECT_EQ(e, cudaErrorNotReady);
    if (e != cudaErrorNotReady || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(1ms);
  }
  cudaGetLastError();  // a polled "not ready" is no error
  return ok;
}

// Whether some captured violation contains every one of `parts`.
inline bool any_contains(const std::vector<std::string>& messages, std::initializer_list<std::string> parts) {
  for (const std::string& m : messages) {
    bool all = true;
    for (const std::string& p : parts) all = all && m.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

inline std::string joined(const std::vector<std::string>& messages) {
  std::string s;
  for (const std::string& m : messages) s += m + "\n---\n";
  return s;
}

}  // namespace nccl_test
