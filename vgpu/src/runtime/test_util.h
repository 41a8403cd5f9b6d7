// Helpers for the runtime's tests: a gate that holds a stream's worker inside a host function
// until the test opens it, and a bounded poll (a hang becomes a test failure, not a timeout).
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <vgpu/runtime.h>

namespace vgpu_test {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  static void wait_fn(void* p) {
    auto* g = static_cast<Gate*>(p);
    std::unique_lock<std::mutex> lock(g->mu);
    g->entered = true;
    g->cv.notify_all();
    g->cv.wait(lock, [g] { return g->open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  // Queues the gate on s: everything queued on s after it waits until release().
  void block(cudaStream_t s) { cudaLaunchHostFunc(s, &Gate::wait_fn, this); }
};

// Sets an int to 1 when run (cudaLaunchHostFunc).
inline void set_flag(void* p) { *static_cast<volatile int*>(p) = 1; }

// Polls cudaStreamQuery until success (clearing the "not ready" last error) for up to 20 s.
inline cudaError_t wait_stream_polling(cudaStream_t s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e != cudaErrorNotReady) return e;
    cudaGetLastError();
    if (std::chrono::steady_clock::now() > deadline) return cudaErrorNotReady;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Tests that use devices 1..n-1 hold one: it raises the device count to n for the test when
// VGPU_DEVICES is smaller, and restores it after.
struct AtLeastDevices {
  bool raised = false;
  explicit AtLeastDevices(int n) {
    if (vgpu::device_count() < n) {
      vgpu::set_device_count_for_testing(n);
      raised = true;
    }
  }
  ~AtLeastDevices() {
    cudaSetDevice(0);
    if (raised) vgpu::set_device_count_for_testing(-1);
  }
};

// Whether one message contains every given needle.
inline bool any_contains(const std::vector<std::string>& msgs, const std::string& a, const std::string& b = "",
                         const std::string& c = "") {
  for (const auto& m : msgs)
    if (m.find(a) != std::string::npos && m.find(b) != std::string::npos && m.find(c) != std::string::npos) return true;
  return false;
}

// The messages, one per line (for a failure's output).
inline std::string joined(const std::vector<std::string>& msgs) {
  std::string s;
  for (const auto& m : msgs) s += m + "\n";
  return s;
}

}  // namespace vgpu_test
