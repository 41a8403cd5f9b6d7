// Communicator: collectives and point-to-point messages over a group of ranks, the same
// interface for threads in one process (local), MPI processes (mpi) and GPUs (nccl).
// Collectives must be called by every rank of the group in the same order. A rank that does
// not arrive within the timeout makes the others fail with CommError naming it and the call.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/tensor/tensor.h"

namespace ptdp {

enum class ReduceOp { Sum, Max };

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Completion of an asynchronous operation. wait() rethrows its failure. An empty handle is done.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(std::function<void()> wait_fn) : wait_(std::move(wait_fn)) {}
  void wait() {
    if (wait_) {
      auto w = std::move(wait_);
      wait_ = nullptr;
      w();
    }
  }

 private:
  std::function<void()> wait_;
};

// The part of n elements that rank r of a group of `size` holds in reduce_scatter/all_gather:
// balanced, the first n % size ranks one element more.
struct ChunkRange {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
ChunkRange chunk_range(int64_t n, int size, int rank);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // In place; every rank ends with the same values (same reduction order on every rank).
  virtual void all_reduce(Tensor& x, ReduceOp op) = 0;
  // out (n elements) receives every rank's chunk_range(n, size, r) piece, taken from in.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  // in has n elements on every rank; out receives the reduced chunk_range(n, size, rank).
  virtual void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  virtual void broadcast(Tensor& x, int root) = 0;
  virtual void send(const Tensor& x, int peer, int tag) = 0;
  virtual void recv(Tensor& x, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // Asynchronous variants; the tensors must stay alive and untouched until wait().
  virtual CommHandle all_reduce_async(Tensor& x, ReduceOp op) = 0;
  // The default runs the reduce-scatter at once and returns a finished handle (mpi, nccl);
  // the local and staging communicators return while it runs.
  virtual CommHandle reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) {
    reduce_scatter(in, out, op);
    return {};
  }
  virtual CommHandle isend(const Tensor& x, int peer, int tag) = 0;
  virtual CommHandle irecv(Tensor& x, int peer, int tag) = 0;

  // Sub-group of the ranks passing the same color, ordered by key (then by rank).
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Makes every rank of the world fail instead of waiting for this one (a rank that cannot go on).
  virtual void abort(const std::string& why) = 0;

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  std::chrono::milliseconds timeout_{std::chrono::seconds(300)};
};

// Checks shared by every backend: dtypes, sizes; throws RuntimeError naming the call.
void check_collective_args(const char* call, const Tensor& in, const Tensor* out, int64_t out_numel);

}  // namespace ptdp
