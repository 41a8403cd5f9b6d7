// GPU time of the work queued on a stream between start() and stop(), from two CUDA events
// (no host synchronization until elapsed_ms). Reusable: start() again begins a new interval.
#pragma once
#include <cuda_runtime.h>

namespace ptdp::cuda {

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start();
  void stop();
  // Waits for the stop event; milliseconds between the two events.
  float elapsed_ms();

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool started_ = false, stopped_ = false;
};

}  // namespace ptdp::cuda
