#include "core/backend/cuda/op_profile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/nvtx.h"
#include "core/common/error.h"

namespace ptdp::cuda {
namespace {
constexpr size_t kMaxPending = 1024;
}

std::unique_ptr<OpProfile> OpProfile::from_env(int device) {
  const char* path = std::getenv("PTDP_OP_PROFILE");
  if (!path || !*path) return nullptr;
  return std::make_unique<OpProfile>(path, device);
}

OpProfile::OpProfile(std::string path, int device) : path_(std::move(path)), device_(device) {}

OpProfile::~OpProfile() {
  try {
    drain();
    write();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptdp: PTDP_OP_PROFILE %s: %s\n", path_.c_str(), e.what());
  }
  for (const Pending& p : pending_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  if (open_start_) cudaEventDestroy(open_start_);
}

cudaEvent_t OpProfile::take_event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  PTDP_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void OpProfile::begin(const char* op, cudaStream_t stream) {
  if (depth_++ > 0) return;
  open_op_ = op;
  open_flops_ = open_bytes_ = 0;
  open_start_ = take_event();
  PTDP_CUDA_CHECK(cudaEventRecord(open_start_, stream));
}

void OpProfile::end(cudaStream_t stream) {
  if (depth_ == 0 || --depth_ > 0) return;
  cudaEvent_t stop = take_event();
  PTDP_CUDA_CHECK(cudaEventRecord(stop, stream));
  pending_.push_back({open_op_, open_start_, stop, open_flops_, open_bytes_});
  open_start_ = nullptr;
  if (pending_.size() >= kMaxPending) drain();
}

void OpProfile::count(double flops, double bytes) {
  if (depth_ == 0) return;
  open_flops_ += flops;
  open_bytes_ += bytes;
}

void OpProfile::drain() {
  if (pending_.empty()) return;
  PTDP_CUDA_CHECK(cudaEventSynchronize(pending_.back().stop));
  for (const Pending& p : pending_) {
    float ms = 0;
    PTDP_CUDA_CHECK(cudaEventSynchronize(p.stop));
    PTDP_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    Entry& e = totals_[p.op];
    e.calls += 1;
    e.ms += ms;
    e.flops += p.flops;
    e.bytes += p.bytes;
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

const std::map<std::string, OpProfile::Entry>& OpProfile::totals() {
  drain();
  return totals_;
}

void OpProfile::restart() {
  drain();
  totals_.clear();
}

void OpProfile::write() {
  if (totals_.empty()) return;
  std::string rows;
  for (const auto& [op, e] : totals_)
    rows += fmt::format("{},{},{},{:.9g},{:.9g},{:.9g}\n", device_, op, e.calls, e.ms, e.flops / 1e9, e.bytes / 1e9);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError(fmt::format("cannot open for appending: {}", std::strerror(errno)));
  ::flock(fd, LOCK_EX);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size == 0) rows = "device,op,calls,total_ms,gflop,gbyte\n" + rows;
  const ssize_t n = ::write(fd, rows.data(), rows.size());
  const bool ok = n == ssize_t(rows.size());
  ::close(fd);
  if (!ok) throw RuntimeError("short write");
}

OpScope::OpScope(OpProfile* profile, const char* op, cudaStream_t stream) : profile_(profile), stream_(stream) {
  nvtxRangePushA(op);
  if (profile_) {
    try {
      profile_->begin(op, stream_);
    } catch (...) {
      nvtxRangePop();
      throw;
    }
  }
}

OpScope::~OpScope() {
  if (profile_) {
    try {
      profile_->end(stream_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ptdp: PTDP_OP_PROFILE: %s\n", e.what());
    }
  }
  nvtxRangePop();
}

}  // namespace ptdp::cuda
