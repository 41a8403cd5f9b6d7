// GPU time per backend op (PTDP_OP_PROFILE=FILE): every top-level op of a CUDA backend is
// bracketed by two CUDA events on its stream; the intervals are summed per op name, with the
// FLOPs and the device-memory bytes the op's own passes must move (its inputs read and outputs
// written once per kernel or GEMM, as the op implements it), and, when the backend is destroyed,
// appended to FILE as CSV rows `device,op,calls,total_ms,gflop,gbyte` (header when the file is
// empty; under an exclusive lock, so thread ranks share one file). The events cost a few
// microseconds of host time per op and no device synchronisation until 1024 intervals are pending.
// An interval spans from the op's first queued work to its last, so where the host cannot keep the
// GPU busy it includes the idle time in between.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ptdp::cuda {

class OpProfile {
 public:
  // Null unless the environment variable PTDP_OP_PROFILE names a file.
  static std::unique_ptr<OpProfile> from_env(int device);
  OpProfile(std::string path, int device);
  ~OpProfile();  // writes the table; never throws
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Nested calls are counted in their outermost op only.
  void begin(const char* op, cudaStream_t stream);
  void end(cudaStream_t stream);
  // Adds to the open op's work (the outermost one).
  void count(double flops, double bytes);

  struct Entry {
    long calls = 0;
    double ms = 0, flops = 0, bytes = 0;
  };
  // Waits for the pending intervals; the sums so far.
  const std::map<std::string, Entry>& totals();
  // Drops the sums so far (an op still open is counted when it ends).
  void restart();

 private:
  struct Pending {
    const char* op;
    cudaEvent_t start, stop;
    double flops, bytes;
  };
  cudaEvent_t take_event();
  void drain();
  void write();

  std::string path_;
  int device_;
  int depth_ = 0;
  const char* open_op_ = nullptr;
  cudaEvent_t open_start_ = nullptr;
  double open_flops_ = 0, open_bytes_ = 0;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Entry> totals_;
};

// An NVTX range named `op`, and the op's interval in `profile` when it is not null.
class OpScope {
 public:
  OpScope(OpProfile* profile, const char* op, cudaStream_t stream);
  ~OpScope();
  // The op's FLOPs and device-memory bytes (when profiling).
  void count(double flops, double bytes) {
    if (profile_) profile_->count(flops, bytes);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfile* profile_;
  cudaStream_t stream_;
};

}  // namespace ptdp::cuda
