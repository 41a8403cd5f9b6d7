// Several GPUs driven by one process and one thread, as nccl-tests runs with -g N (`ptdp accept`'s
// checks inside a node, bench_nccl): one NCCL communicator per GPU made together
// (ncclCommInitAll), each GPU's CUDA backend (its stream, its buffers), grouped launches timed with
// CUDA events on every GPU, and waits that poll the streams and NCCL's asynchronous errors and
// abort the communicators after a timeout instead of hanging. After an error the node is aborted
// and refuses further work. Built with the CUDA backend and NCCL only.
#pragma once
#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/event_timer.h"
#include "core/common/error.h"

// A checked NCCL call: throws RuntimeError naming the call, NCCL's error and last error, file and line.
#define PTDP_NCCL_OK(call)                                                                        \
  do {                                                                                            \
    const ncclResult_t ptdp_nccl_r_ = (call);                                                     \
    if (ptdp_nccl_r_ != ncclSuccess) ::ptdp::throw_nccl_error(#call, ptdp_nccl_r_, __FILE__, __LINE__); \
  } while (0)

namespace ptdp {

[[noreturn]] void throw_nccl_error(const char* call, ncclResult_t r, const char* file, int line);

// NCCL's version, e.g. "2.28.3".
std::string nccl_version_string();

class NcclNode {
 public:
  explicit NcclNode(std::vector<int> devices, std::chrono::seconds timeout = std::chrono::seconds(300));
  ~NcclNode();
  NcclNode(const NcclNode&) = delete;
  NcclNode& operator=(const NcclNode&) = delete;

  int size() const { return int(devices_.size()); }
  int device(int i) const { return devices_[size_t(i)]; }
  Backend& backend(int i) { return *backends_[size_t(i)]; }
  ncclComm_t comm(int i) const { return comms_[size_t(i)]; }
  cudaStream_t stream(int i);
  // Empty while usable; else why not.
  const std::string& broken() const { return broken_; }

  // Queues launch(i) for every GPU inside one NCCL group.
  void group(const std::function<void(int i)>& launch);
  // Queues `calls` between two events on every GPU's stream, waits for them (wait) and returns
  // the longest GPU's time in seconds; `what` names the work in errors.
  double seconds(const char* what, const std::function<void()>& calls);
  // Waits for the work queued on every GPU, polling the streams and the communicators'
  // asynchronous errors; after the timeout aborts the node and throws.
  void wait(const char* what);
  // Waits for every GPU's work and gives its cached device memory back (not after an abort).
  void release_cached();

 private:
  void abort_all(const std::string& why);

  std::vector<int> devices_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<cuda::EventTimer>> timers_;
  std::vector<ncclComm_t> comms_;
  bool live_ = false;
  std::chrono::seconds timeout_;
  std::string broken_;
};

}  // namespace ptdp
