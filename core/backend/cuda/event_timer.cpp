#include "core/backend/cuda/event_timer.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/common/error.h"

namespace ptdp::cuda {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {
  PTDP_CUDA_CHECK(cudaEventCreate(&start_));
  const cudaError_t e = cudaEventCreate(&stop_);
  if (e != cudaSuccess) {
    cudaEventDestroy(start_);
    throw_cuda_error("cudaEventCreate(&stop_)", e, __FILE__, __LINE__);
  }
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void EventTimer::start() {
  PTDP_CUDA_CHECK(cudaEventRecord(start_, stream_));
  started_ = true;
  stopped_ = false;
}

void EventTimer::stop() {
  PTDP_CHECK(started_, "EventTimer::stop before start");
  PTDP_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  stopped_ = true;
}

float EventTimer::elapsed_ms() {
  PTDP_CHECK(stopped_, "EventTimer::elapsed_ms before stop");
  PTDP_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  PTDP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace ptdp::cuda
