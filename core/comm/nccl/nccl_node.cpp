#include "core/comm/nccl/nccl_node.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_guard.h"

namespace ptdp {

void throw_nccl_error(const char* call, ncclResult_t r, const char* file, int line) {
  throw RuntimeError(
      fmt::format("{} failed: {} ({}) at {}:{}", call, ncclGetErrorString(r), ncclGetLastError(nullptr), file, line));
}

std::string nccl_version_string() {
  int v = 0;
  PTDP_NCCL_OK(ncclGetVersion(&v));
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

NcclNode::NcclNode(std::vector<int> devices, std::chrono::seconds timeout)
    : devices_(std::move(devices)), timeout_(timeout) {
  for (const int d : devices_) {
    backends_.push_back(make_cuda_backend(d));
    cuda::DeviceGuard g(d);
    timers_.push_back(std::make_unique<cuda::EventTimer>(cuda_stream(*backends_.back())));
  }
  comms_.assign(devices_.size(), nullptr);
  PTDP_NCCL_OK(ncclCommInitAll(comms_.data(), size(), devices_.data()));
  live_ = true;
}

NcclNode::~NcclNode() {  // unchecked: also runs while an error propagates
  for (auto& be : backends_) cudaStreamSynchronize(cuda_stream(*be));
  if (live_)
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
}

cudaStream_t NcclNode::stream(int i) { return cuda_stream(backend(i)); }

void NcclNode::group(const std::function<void(int)>& launch) {
  PTDP_NCCL_OK(ncclGroupStart());
  for (int i = 0; i < size(); ++i) launch(i);
  PTDP_NCCL_OK(ncclGroupEnd());
}

double NcclNode::seconds(const char* what, const std::function<void()>& calls) {
  PTDP_CHECK(broken_.empty(), "NCCL node unusable: {}", broken_);
  try {
    for (int i = 0; i < size(); ++i) {
      cuda::DeviceGuard g(device(i));
      timers_[size_t(i)]->start();
    }
    calls();
    for (int i = 0; i < size(); ++i) {
      cuda::DeviceGuard g(device(i));
      timers_[size_t(i)]->stop();
    }
    wait(what);
    double longest = 0;
    for (auto& t : timers_) longest = std::max(longest, double(t->elapsed_ms()) / 1e3);
    return longest;
  } catch (const std::exception& e) {
    abort_all(e.what());
    throw;
  }
}

void NcclNode::wait(const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    bool done = true;
    for (int i = 0; i < size(); ++i) {
      const cudaError_t e = cudaStreamQuery(stream(i));
      if (e == cudaErrorNotReady) done = false;
      else if (e != cudaSuccess) cuda::throw_cuda_error("cudaStreamQuery(stream of GPU)", e, __FILE__, __LINE__);
    }
    for (int i = 0; i < size(); ++i) {
      ncclResult_t async = ncclSuccess;
      PTDP_NCCL_OK(ncclCommGetAsyncError(comms_[size_t(i)], &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string why = fmt::format("NCCL {} on GPU {}: asynchronous error {} ({})", what, device(i),
                                            ncclGetErrorString(async), ncclGetLastError(comms_[size_t(i)]));
        abort_all(why);
        throw RuntimeError(why);
      }
    }
    if (done) break;
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string why =
          fmt::format("NCCL {} on {} GPUs did not finish within {} s; the communicators were aborted", what, size(),
                      timeout_.count());
      abort_all(why);
      throw RuntimeError(why);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  const cudaError_t last = cudaGetLastError();  // a polled "not ready" is no error
  if (last != cudaSuccess && last != cudaErrorNotReady)
    cuda::throw_cuda_error("cudaGetLastError after NCCL work", last, __FILE__, __LINE__);
}

void NcclNode::release_cached() {
  if (!broken_.empty()) return;  // aborted: nothing more is queued, nothing is waited for
  for (auto& be : backends_) {
    be->synchronize();
    cuda::DeviceAllocator::for_device(cuda_device(*be)).release_cached();
  }
}

void NcclNode::abort_all(const std::string& why) {
  if (broken_.empty()) broken_ = fmt::format("aborted after an earlier error: {}", why);
  if (!live_) return;
  for (ncclComm_t c : comms_) ncclCommAbort(c);
  live_ = false;
}

}  // namespace ptdp
