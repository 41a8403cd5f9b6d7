#include "core/comm/mpi/mpi_comm.h"

#include <mpi.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace ptdp {

namespace {

#define PTDP_MPI_CHECK(call)                                                                      \
  do {                                                                                            \
    int rc_ = (call);                                                                             \
    if (rc_ != MPI_SUCCESS) {                                                                     \
      char msg_[MPI_MAX_ERROR_STRING];                                                            \
      int len_ = 0;                                                                               \
      MPI_Error_string(rc_, msg_, &len_);                                                         \
      throw CommError(fmt::format("{} failed: {} at {}:{}", #call, std::string(msg_, len_), __FILE__, __LINE__)); \
    }                                                                                             \
  } while (0)

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::BF16:
    case DType::F16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm comm, bool owned, std::chrono::milliseconds timeout) : comm_(comm), owned_(owned) {
    timeout_ = timeout;
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    members_.resize(size_);
    MPI_Group g, wg;
    MPI_Comm_group(comm_, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> mine(size_);
    for (int i = 0; i < size_; ++i) mine[i] = i;
    MPI_Group_translate_ranks(g, size_, mine.data(), wg, members_.data());
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
  }
  ~MpiComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(Tensor& x, ReduceOp op) override { all_reduce_async(x, op).wait(); }

  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override {
    check_collective_args("all_reduce", x, nullptr, 0);
    if (is_16bit(x.dtype())) {  // MPI has no bf16/f16 sum: reduce an f32 copy, round once
      Tensor w = Tensor::empty(x.shape(), DType::F32);
      w.copy_from(x);
      CommHandle h = all_reduce_async(w, op);
      return CommHandle([h, w, x]() mutable {
        h.wait();
        x.copy_from(w);
      });
    }
    check_reducible(x.dtype(), "all_reduce");
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, x.raw(), int(x.numel()), mpi_type(x.dtype()), mpi_op(op), comm_, &req));
    return handle(req, "all_reduce");
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    const int64_t n = out.numel();
    check_collective_args("all_gather", in, &out, n);
    std::vector<int> counts(size_), displs(size_);
    for (int q = 0; q < size_; ++q) {
      ChunkRange c = chunk_range(n, size_, q);
      counts[q] = int(c.size());
      displs[q] = int(c.begin);
    }
    PTDP_CHECK(in.numel() == counts[rank_], "all_gather: input is not this rank's chunk");
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Iallgatherv(in.raw(), counts[rank_], mpi_type(in.dtype()), out.raw(), counts.data(),
                                   displs.data(), mpi_type(in.dtype()), comm_, &req));
    handle(req, "all_gather").wait();
  }

  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    std::vector<int> counts(size_);
    for (int q = 0; q < size_; ++q) counts[q] = int(chunk_range(in.numel(), size_, q).size());
    check_collective_args("reduce_scatter", in, &out, counts[rank_]);
    if (is_16bit(in.dtype())) {
      Tensor wi = Tensor::empty(in.shape(), DType::F32), wo = Tensor::empty(out.shape(), DType::F32);
      wi.copy_from(in);
      reduce_scatter(wi, wo, op);
      out.copy_from(wo);
      return;
    }
    check_reducible(in.dtype(), "reduce_scatter");
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Ireduce_scatter(in.raw(), out.raw(), counts.data(), mpi_type(in.dtype()), mpi_op(op), comm_,
                                       &req));
    handle(req, "reduce_scatter").wait();
  }

  void broadcast(Tensor& x, int root) override {
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Ibcast(x.raw(), int(x.numel()), mpi_type(x.dtype()), root, comm_, &req));
    handle(req, "broadcast").wait();
  }

  void barrier() override {
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    handle(req, "barrier").wait();
  }

  void send(const Tensor& x, int peer, int tag) override { isend(x, peer, tag).wait(); }
  void recv(Tensor& x, int peer, int tag) override { irecv(x, peer, tag).wait(); }

  CommHandle isend(const Tensor& x, int peer, int tag) override {
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Isend(x.raw(), int(x.numel()), mpi_type(x.dtype()), peer, tag, comm_, &req));
    return handle(req, "send");
  }

  CommHandle irecv(Tensor& x, int peer, int tag) override {
    MPI_Request req;
    PTDP_MPI_CHECK(MPI_Irecv(x.raw(), int(x.numel()), mpi_type(x.dtype()), peer, tag, comm_, &req));
    return handle(req, "recv");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    PTDP_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (sub == MPI_COMM_NULL) {  // a rank outside every group gets a group of its own
      PTDP_MPI_CHECK(MPI_Comm_split(MPI_COMM_SELF, 0, 0, &sub));
    }
    return std::make_unique<MpiComm>(sub, true, timeout_);
  }

  void abort(const std::string& why) override {
    std::fprintf(stderr, "ptdp: failed: mpi comm: rank %d stopped: %s\n", world_rank_, why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  static bool is_16bit(DType t) { return t == DType::BF16 || t == DType::F16; }
  void check_reducible(DType t, const char* call) const {
    PTDP_CHECK(t == DType::F32 || t == DType::F64 || t == DType::I32, "mpi comm: {} reduces f32, f64, i32", call);
  }

  // Polls the request until done; past the timeout the job is aborted with a message.
  CommHandle handle(MPI_Request req, const char* call) {
    const uint64_t seq = ++seq_;
    return CommHandle([this, req, call, seq]() mutable {
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      auto pause = std::chrono::microseconds(1);
      for (;;) {
        int done = 0;
        PTDP_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (std::chrono::steady_clock::now() >= deadline) {
          std::string group;
          for (int m : members_) {
            if (!group.empty()) group += ',';
            group += std::to_string(m);
          }
          abort(fmt::format("waited {:.1f} s in {} (call #{}) of the group of ranks {{{}}}: a rank of the group did "
                            "not arrive",
                            timeout_.count() / 1e3, call, seq, group));
        }
        std::this_thread::sleep_for(pause);
        if (pause < std::chrono::microseconds(500)) pause *= 2;
      }
    });
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
  std::vector<int> members_;  // world ranks of this group
  uint64_t seq_ = 0;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
  }
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiSession::world(std::chrono::milliseconds timeout) {
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, timeout);
}

bool MpiSession::launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace ptdp
