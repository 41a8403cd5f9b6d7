#include "core/comm/nccl/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_allocator.h"

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

// cudaStreamQuery / cudaEventQuery: true when done. cudaErrorNotReady is also left as the
// thread's last error by the runtime; it is cleared here so that no later check reports it.
bool done(cudaError_t q, const char* call) {
  if (q == cudaSuccess) return true;
  if (q == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw CommError(fmt::format("{} failed: {}", call, cudaGetErrorString(q)));
}

using Event = std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>;  // destroyed with its last handle

Event make_event() {
  cudaEvent_t e = nullptr;
  PTDP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Event(e, [](cudaEvent_t ev) { cudaEventDestroy(ev); });
}

// What the communicator and its handles share: the NCCL communicator and whether it is gone.
// abort() may come from another thread (a failing rank), so NCCL calls on `comm` hold `mu`.
struct Core {
  std::mutex mu;
  ncclComm_t comm = nullptr;
  ncclComm_t p2p[2] = {nullptr, nullptr};  // sends up / down the ranks (duplicates of comm); null in a group of one
  bool freed = false;  // aborted or destroyed: NCCL must not see `comm` again
  std::string why;     // the abort's reason
  int device = 0, rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
};

// A batch of sends and receives not yet issued, and the event its group is recorded to.
struct P2PBatch {
  struct Op {
    bool send;
    void* buf;
    size_t count;
    ncclDataType_t type;
    int peer;
  };
  std::vector<Op> ops;
  Event issued;  // null until the group is queued
};

void abort_comms(Core& core) {  // (core.mu held)
  ncclCommAbort(core.comm);
  for (ncclComm_t c : core.p2p)
    if (c) ncclCommAbort(c);
}

// After an abort, waits (up to 10 s) for the work queued before `ev` to end, as the abort makes it
// do: the caller's buffers may then be freed, and the caching allocator hands a freed block back
// to the compute stream at once, where work that the aborted operation had not finished touching
// would race with it.
void settle(const Event& ev) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    const cudaError_t q = cudaEventQuery(ev.get());
    if (q != cudaErrorNotReady) break;
    cudaGetLastError();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaGetLastError();
}

// Polls `ev` until the work before it is done; fails with the call named on an asynchronous
// NCCL error, an abort, or the timeout (then the communicator is aborted), once the aborted work
// has ended (settle).
void wait_for(const std::shared_ptr<Core>& core, const Event& ev, const char* call, uint64_t seq) {
  const auto deadline = std::chrono::steady_clock::now() + core->timeout;
  for (;;) {
    std::string failure;
    {
      // Checked before the event: an abort ends the work in flight, so its event completes
      // without the operation having happened.
      std::lock_guard<std::mutex> lock(core->mu);
      if (core->freed) {
        failure = fmt::format("nccl comm: rank {} in {} (call #{}): the communicator was aborted ({})", core->rank,
                              call, seq, core->why);
      } else if (done(cudaEventQuery(ev.get()), "cudaEventQuery")) {
        return;
      } else {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(core->comm, &async);
        for (ncclComm_t c : core->p2p)
          if (async == ncclSuccess && c) ncclCommGetAsyncError(c, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          core->freed = true;
          core->why = fmt::format("rank {}: {} in {}", core->rank, ncclGetErrorString(async), call);
          abort_comms(*core);
          failure = fmt::format("nccl comm: rank {} in {} (call #{}): {}", core->rank, call, seq,
                                ncclGetErrorString(async));
        } else if (std::chrono::steady_clock::now() >= deadline) {
          core->freed = true;
          core->why = fmt::format("rank {} timed out in {}", core->rank, call);
          abort_comms(*core);
          failure = fmt::format("nccl comm: rank {} waited {:.1f} s in {} (call #{}); a rank of the group did "
                                "not arrive; the communicator was aborted",
                                core->rank, core->timeout.count() / 1e3, call, seq);
        }
      }
    }
    if (!failure.empty()) {
      settle(ev);
      throw CommError(failure);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Device scratch for padded collectives, from the GPU's caching allocator, on the NCCL stream.
class Scratch {
 public:
  Scratch(int device, size_t bytes, cudaStream_t st)
      : alloc_(cuda::DeviceAllocator::for_device(device)), bytes_(bytes), p_(alloc_.allocate(bytes, st)) {}
  ~Scratch() { alloc_.deallocate(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* get() const { return static_cast<char*>(p_); }

 private:
  cuda::DeviceAllocator& alloc_;
  size_t bytes_;
  void* p_;
};

class NcclComm final : public Communicator {
 public:
  NcclComm(ncclComm_t comm, int device, std::chrono::milliseconds timeout, cudaStream_t compute)
      : core_(std::make_shared<Core>()), compute_(compute) {
    timeout_ = timeout;
    core_->comm = comm;
    core_->device = device;
    core_->timeout = timeout;
    PTDP_NCCL_CHECK(ncclCommUserRank(comm, &core_->rank));
    PTDP_NCCL_CHECK(ncclCommCount(comm, &core_->size));
    PTDP_CUDA_CHECK(cudaSetDevice(device));
    PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (compute_) ready_ = make_event();
    if (core_->size > 1)  // collective: every rank of the group constructs its communicator now
      for (int ch = 0; ch < 2; ++ch) {
        PTDP_NCCL_CHECK(ncclCommSplit(comm, 0, core_->rank, &core_->p2p[ch], nullptr));
        PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&p2p_stream_[ch], cudaStreamNonBlocking));
      }
  }

  // A communicator whose work is done is destroyed; one with work still in flight (a failure
  // left it: nobody will wait for it, and a dead peer may never complete it) is aborted, since
  // ncclCommDestroy would wait for that work forever.
  ~NcclComm() override {
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      if (!core_->freed) {
        bool idle = false;
        try {
          idle = done(cudaStreamQuery(stream_), "cudaStreamQuery");
          for (cudaStream_t st : p2p_stream_)
            if (st && !done(cudaStreamQuery(st), "cudaStreamQuery")) idle = false;
        } catch (const CommError&) {
        }
        core_->freed = true;
        core_->why = "the communicator was destroyed";
        if (!idle) {
          abort_comms(*core_);
        } else {
          ncclCommDestroy(core_->comm);
          for (ncclComm_t c : core_->p2p)
            if (c) ncclCommDestroy(c);
        }
      }
    }
    // An abort ends the NCCL work left on the stream; once the stream is drained the host may hand
    // the buffers that work used to anything else.
    cudaStreamSynchronize(stream_);
    for (cudaStream_t st : p2p_stream_)
      if (st) {
        cudaStreamSynchronize(st);
        cudaStreamDestroy(st);
      }
    if (barrier_buf_) cudaFree(barrier_buf_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return core_->rank; }
  int size() const override { return core_->size; }
  std::string backend() const override { return "nccl"; }

  void all_reduce(Tensor& x, ReduceOp op) override { all_reduce_async(x, op).wait(); }
  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override {
    on_device(x, "all_reduce");
    begin();
    PTDP_NCCL_CHECK(ncclAllReduce(x.raw(), x.raw(), x.numel(), nccl_type(x.dtype()), nccl_op(op), comm(), stream_));
    return pending("all_reduce");
  }

  // ncclAllGather needs equal chunks; uneven ones (chunk_range) go through padded scratch.
  void all_gather(const Tensor& in, Tensor& out) override {
    check_collective_args("all_gather", in, &out, out.numel());
    on_device(out, "all_gather");
    const int64_t n = out.numel();
    const ChunkRange mine = chunk_range(n, size(), rank());
    PTDP_CHECK(in.numel() == mine.size(), "all_gather: rank {} holds {} elements, its chunk is {}", rank(),
               in.numel(), mine.size());
    const size_t es = dtype_size(out.dtype());
    const ncclDataType_t t = nccl_type(out.dtype());
    begin();
    if (n % size() == 0) {
      PTDP_NCCL_CHECK(ncclAllGather(in.raw(), out.raw(), n / size(), t, comm(), stream_));
      return pending("all_gather").wait();
    }
    const int64_t c = (n + size() - 1) / size();
    Scratch send(core_->device, c * es, stream_), recv(core_->device, c * size() * es, stream_);
    PTDP_CUDA_CHECK(cudaMemsetAsync(send.get(), 0, c * es, stream_));
    if (mine.size() > 0)
      PTDP_CUDA_CHECK(cudaMemcpyAsync(send.get(), in.raw(), mine.size() * es, cudaMemcpyDeviceToDevice, stream_));
    PTDP_NCCL_CHECK(ncclAllGather(send.get(), recv.get(), c, t, comm(), stream_));
    for (int q = 0; q < size(); ++q) {
      const ChunkRange r = chunk_range(n, size(), q);
      if (r.size() > 0)
        PTDP_CUDA_CHECK(cudaMemcpyAsync(bytes(out) + r.begin * es, recv.get() + q * c * es, r.size() * es,
                                        cudaMemcpyDeviceToDevice, stream_));
    }
    pending("all_gather").wait();
  }

  // ncclReduceScatter needs equal chunks; uneven ones go through padded scratch.
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    const int64_t n = in.numel();
    const ChunkRange mine = chunk_range(n, size(), rank());
    check_collective_args("reduce_scatter", in, &out, mine.size());
    on_device(in, "reduce_scatter");
    const size_t es = dtype_size(in.dtype());
    const ncclDataType_t t = nccl_type(in.dtype());
    begin();
    if (n % size() == 0) {
      PTDP_NCCL_CHECK(ncclReduceScatter(in.raw(), out.raw(), n / size(), t, nccl_op(op), comm(), stream_));
      return pending("reduce_scatter").wait();
    }
    const int64_t c = (n + size() - 1) / size();
    Scratch send(core_->device, c * size() * es, stream_), recv(core_->device, c * es, stream_);
    PTDP_CUDA_CHECK(cudaMemsetAsync(send.get(), 0, c * size() * es, stream_));
    for (int q = 0; q < size(); ++q) {
      const ChunkRange r = chunk_range(n, size(), q);
      if (r.size() > 0)
        PTDP_CUDA_CHECK(cudaMemcpyAsync(send.get() + q * c * es, bytes(in) + r.begin * es, r.size() * es,
                                        cudaMemcpyDeviceToDevice, stream_));
    }
    PTDP_NCCL_CHECK(ncclReduceScatter(send.get(), recv.get(), c, t, nccl_op(op), comm(), stream_));
    if (mine.size() > 0)
      PTDP_CUDA_CHECK(cudaMemcpyAsync(out.raw(), recv.get(), mine.size() * es, cudaMemcpyDeviceToDevice, stream_));
    pending("reduce_scatter").wait();
  }

  void broadcast(Tensor& x, int root) override {
    on_device(x, "broadcast");
    begin();
    PTDP_NCCL_CHECK(ncclBroadcast(x.raw(), x.raw(), x.numel(), nccl_type(x.dtype()), root, comm(), stream_));
    pending("broadcast").wait();
  }

  void barrier() override {
    if (!barrier_buf_) {
      PTDP_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
      PTDP_CUDA_CHECK(cudaMemsetAsync(barrier_buf_, 0, sizeof(float), stream_));
    }
    Tensor t = Tensor::wrap(barrier_buf_, {1}, DType::F32, Device::CUDA);
    all_reduce(t, ReduceOp::Sum);
  }

  void send(const Tensor& x, int peer, int tag) override { isend(x, peer, tag).wait(); }
  void recv(Tensor& x, int peer, int tag) override { irecv(x, peer, tag).wait(); }
  // NCCL matches sends and receives by order between a pair of ranks, not by tag: callers post
  // them in the same order on both sides (the pipeline schedules do). Two channels, each a
  // communicator with a stream of its own, carry the sends to higher ranks (and the receives from
  // lower ones) and the sends to lower ranks: in each, traffic flows one way, so a send that
  // waits for its receiver never holds up a receive queued behind it on the same stream (with
  // p = 2 both pipeline directions join the same pair of ranks). Operations are issued together,
  // one NCCL group per channel, when one of them is waited for or another operation starts, so
  // a rank has issued all its sends before it blocks.
  CommHandle isend(const Tensor& x, int peer, int tag) override { return post(true, x, peer, tag, "send"); }
  CommHandle irecv(Tensor& x, int peer, int tag) override { return post(false, x, peer, tag, "recv"); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    flush();
    ncclComm_t sub = nullptr;
    PTDP_NCCL_CHECK(ncclCommSplit(comm(), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
    if (!sub) {  // outside every group: a group of one
      ncclUniqueId id;
      PTDP_NCCL_CHECK(ncclGetUniqueId(&id));
      PTDP_NCCL_CHECK(ncclCommInitRank(&sub, 1, id, 0));
    }
    return std::make_unique<NcclComm>(sub, core_->device, timeout_, compute_);
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (core_->freed) return;
    core_->freed = true;
    core_->why = why;
    abort_comms(*core_);
  }

 private:
  void on_device(const Tensor& t, const char* call) const {
    PTDP_CHECK(t.device() == Device::CUDA, "nccl comm: {} needs a device tensor", call);
  }

  ncclComm_t comm() {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (core_->freed)
      throw CommError(fmt::format("nccl comm: rank {}: the communicator was aborted ({})", core_->rank, core_->why));
    return core_->comm;
  }

  // Before an operation: pending sends and receives go first, and the NCCL stream waits for the
  // work queued so far on the compute stream (buffers it still writes or reads).
  void begin() {
    flush();
    order_after_compute(stream_);
  }

  void order_after_compute(cudaStream_t st) {
    if (!compute_) return;
    PTDP_CUDA_CHECK(cudaEventRecord(ready_.get(), compute_));
    PTDP_CUDA_CHECK(cudaStreamWaitEvent(st, ready_.get(), 0));
  }

  // An event after the work just queued; waiting polls it and NCCL's asynchronous error.
  CommHandle pending(const char* call) {
    Event ev = make_event();
    PTDP_CUDA_CHECK(cudaEventRecord(ev.get(), stream_));
    const uint64_t seq = ++seq_;
    return CommHandle([core = core_, ev, call, seq] { wait_for(core, ev, call, seq); });
  }

  CommHandle post(bool send, const Tensor& x, int peer, int tag, const char* call) {
    on_device(x, call);
    PTDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "nccl comm: {} to rank {} of a group of {} (rank {})",
               call, peer, size(), rank());
    std::shared_ptr<P2PBatch>& batch = batch_[send == (peer > rank()) ? 0 : 1];
    if (!batch) batch = std::make_shared<P2PBatch>();
    batch->ops.push_back({send, x.raw(), size_t(x.numel()), nccl_type(x.dtype()), peer});
    const uint64_t seq = ++seq_;
    return CommHandle([this, core = core_, batch, call, seq] {
      if (!batch->issued) flush();
      wait_for(core, batch->issued, call, seq);
    });
  }

  // Issues the collected sends and receives, one NCCL group per channel, after the compute stream.
  void flush() {
    for (int ch = 0; ch < 2; ++ch) {
      if (!batch_[ch]) continue;
      std::shared_ptr<P2PBatch> b = std::move(batch_[ch]);
      batch_[ch].reset();
      cudaStream_t st = p2p_stream_[ch];
      comm();  // throws once aborted
      ncclComm_t c = core_->p2p[ch];
      order_after_compute(st);
      PTDP_NCCL_CHECK(ncclGroupStart());
      for (const P2PBatch::Op& op : b->ops) {
        if (op.send) PTDP_NCCL_CHECK(ncclSend(op.buf, op.count, op.type, op.peer, c, st));
        else PTDP_NCCL_CHECK(ncclRecv(op.buf, op.count, op.type, op.peer, c, st));
      }
      PTDP_NCCL_CHECK(ncclGroupEnd());
      Event ev = make_event();
      PTDP_CUDA_CHECK(cudaEventRecord(ev.get(), st));
      b->issued = ev;
    }
  }

  std::shared_ptr<Core> core_;
  cudaStream_t compute_ = nullptr;  // the rank's compute stream (null: none to order after)
  cudaStream_t stream_ = nullptr;                       // NCCL's, for collectives
  cudaStream_t p2p_stream_[2] = {nullptr, nullptr};  // per p2p channel (up, down)
  Event ready_;                          // recorded on compute_ before each operation
  std::shared_ptr<P2PBatch> batch_[2];   // per channel
  void* barrier_buf_ = nullptr;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device, std::chrono::milliseconds timeout,
                                              Backend* compute) {
  PTDP_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  static_assert(sizeof(id) % sizeof(int32_t) == 0);
  if (bootstrap.rank() == 0) PTDP_NCCL_CHECK(ncclGetUniqueId(&id));
  Tensor buf = Tensor::empty({int64_t(sizeof(id) / sizeof(int32_t))}, DType::I32);
  std::memcpy(buf.raw(), &id, sizeof(id));
  bootstrap.broadcast(buf, 0);
  std::memcpy(&id, buf.raw(), sizeof(id));
  ncclComm_t comm;
  const ncclResult_t r = ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank());
  if (r != ncclSuccess)
    throw CommError(fmt::format("ncclCommInitRank (rank {} of {} on GPU {}) failed: {}: {}", bootstrap.rank(),
                                bootstrap.size(), device, ncclGetErrorString(r), ncclGetLastError(nullptr)));
  return std::make_unique<NcclComm>(comm, device, timeout, compute ? cuda_stream(*compute) : nullptr);
}

}  // namespace ptdp
