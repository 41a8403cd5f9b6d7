#include "core/comm/nccl/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace ptdp {

namespace {

#define PTDP_NCCL_CHECK(call)                                                                              \
  do {                                                                                                     \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess)                                                                                 \
      throw CommError(fmt::format("{} failed: {} at {}:{}", #call, ncclGetErrorString(r_), __FILE__, __LINE__)); \
  } while (0)

#define PTDP_CUDA_CHECK(call)                                                                               \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess)                                                                                  \
      throw CommError(fmt::format("{} failed: {} at {}:{}", #call, cudaGetErrorString(e_), __FILE__, __LINE__)); \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

char* bytes(const Tensor& t) { return static_cast<char*>(t.raw()); }

class NcclComm final : public Communicator {
 public:
  NcclComm(ncclComm_t comm, int device, std::chrono::milliseconds timeout) : comm_(comm), device_(device) {
    timeout_ = timeout;
    PTDP_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    PTDP_NCCL_CHECK(ncclCommCount(comm_, &size_));
    PTDP_CUDA_CHECK(cudaSetDevice(device_));
    PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclComm() override {
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce(Tensor& x, ReduceOp op) override { all_reduce_async(x, op).wait(); }
  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override {
    on_device(x, "all_reduce");
    PTDP_NCCL_CHECK(ncclAllReduce(x.raw(), x.raw(), x.numel(), nccl_type(x.dtype()), nccl_op(op), comm_, stream_));
    return pending("all_reduce");
  }

  // Chunks may differ in size by one element: one broadcast per rank's chunk, grouped.
  void all_gather(const Tensor& in, Tensor& out) override {
    check_collective_args("all_gather", in, &out, out.numel());
    on_device(out, "all_gather");
    const size_t es = dtype_size(out.dtype());
    PTDP_NCCL_CHECK(ncclGroupStart());
    for (int q = 0; q < size_; ++q) {
      ChunkRange c = chunk_range(out.numel(), size_, q);
      const void* src = q == rank_ ? in.raw() : nullptr;
      PTDP_NCCL_CHECK(ncclBroadcast(src, bytes(out) + c.begin * es, c.size(), nccl_type(out.dtype()), q, comm_, stream_));
    }
    PTDP_NCCL_CHECK(ncclGroupEnd());
    pending("all_gather").wait();
  }

  // One reduce per rank's chunk, grouped.
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    ChunkRange mine = chunk_range(in.numel(), size_, rank_);
    check_collective_args("reduce_scatter", in, &out, mine.size());
    on_device(in, "reduce_scatter");
    const size_t es = dtype_size(in.dtype());
    PTDP_NCCL_CHECK(ncclGroupStart());
    for (int q = 0; q < size_; ++q) {
      ChunkRange c = chunk_range(in.numel(), size_, q);
      PTDP_NCCL_CHECK(ncclReduce(bytes(in) + c.begin * es, q == rank_ ? out.raw() : nullptr, c.size(),
                                 nccl_type(in.dtype()), nccl_op(op), q, comm_, stream_));
    }
    PTDP_NCCL_CHECK(ncclGroupEnd());
    pending("reduce_scatter").wait();
  }

  void broadcast(Tensor& x, int root) override {
    on_device(x, "broadcast");
    PTDP_NCCL_CHECK(ncclBroadcast(x.raw(), x.raw(), x.numel(), nccl_type(x.dtype()), root, comm_, stream_));
    pending("broadcast").wait();
  }

  void barrier() override {
    if (!barrier_buf_) PTDP_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
    Tensor t = Tensor::wrap(barrier_buf_, {1}, DType::F32, Device::CUDA);
    all_reduce(t, ReduceOp::Sum);
  }

  void send(const Tensor& x, int peer, int tag) override { isend(x, peer, tag).wait(); }
  void recv(Tensor& x, int peer, int tag) override { irecv(x, peer, tag).wait(); }
  // NCCL matches sends and receives by order between a pair of ranks, not by tag: callers post
  // them in the same order on both sides (the pipeline schedules do).
  CommHandle isend(const Tensor& x, int peer, int) override {
    on_device(x, "send");
    PTDP_NCCL_CHECK(ncclSend(x.raw(), x.numel(), nccl_type(x.dtype()), peer, comm_, stream_));
    return pending("send");
  }
  CommHandle irecv(Tensor& x, int peer, int) override {
    on_device(x, "recv");
    PTDP_NCCL_CHECK(ncclRecv(x.raw(), x.numel(), nccl_type(x.dtype()), peer, comm_, stream_));
    return pending("recv");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    PTDP_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
    if (!sub) {  // outside every group: a group of one
      ncclUniqueId id;
      PTDP_NCCL_CHECK(ncclGetUniqueId(&id));
      PTDP_NCCL_CHECK(ncclCommInitRank(&sub, 1, id, 0));
    }
    return std::make_unique<NcclComm>(sub, device_, timeout_);
  }

  void abort(const std::string&) override { ncclCommAbort(comm_); }

 private:
  void on_device(const Tensor& t, const char* call) const {
    PTDP_CHECK(t.device() == Device::CUDA, "nccl comm: {} needs a device tensor", call);
  }

  // An event after the work just queued; waiting polls it and NCCL's asynchronous error.
  CommHandle pending(const char* call) {
    cudaEvent_t ev;
    PTDP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    PTDP_CUDA_CHECK(cudaEventRecord(ev, stream_));
    const uint64_t seq = ++seq_;
    return CommHandle([this, ev, call, seq] {
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
          cudaEventDestroy(ev);
          PTDP_CUDA_CHECK(q);
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm_, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          cudaEventDestroy(ev);
          throw CommError(fmt::format("nccl comm: rank {} in {} (call #{}): {}", rank_, call, seq,
                                      ncclGetErrorString(async)));
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          ncclCommAbort(comm_);
          throw CommError(fmt::format("nccl comm: rank {} waited {:.1f} s in {} (call #{}); a rank of the group did "
                                      "not arrive; the communicator was aborted",
                                      rank_, timeout_.count() / 1e3, call, seq));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      cudaEventDestroy(ev);
    });
  }

  ncclComm_t comm_;
  int device_;
  int rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  void* barrier_buf_ = nullptr;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device, std::chrono::milliseconds timeout) {
  PTDP_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  static_assert(sizeof(id) % sizeof(int32_t) == 0);
  if (bootstrap.rank() == 0) PTDP_NCCL_CHECK(ncclGetUniqueId(&id));
  Tensor buf = Tensor::empty({int64_t(sizeof(id) / sizeof(int32_t))}, DType::I32);
  std::memcpy(buf.raw(), &id, sizeof(id));
  bootstrap.broadcast(buf, 0);
  std::memcpy(&id, buf.raw(), sizeof(id));
  ncclComm_t comm;
  PTDP_NCCL_CHECK(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  return std::make_unique<NcclComm>(comm, device, timeout);
}

}  // namespace ptdp
