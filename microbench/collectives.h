// The collectives of the Communicator interface as nccl-tests describes them: for a message of
// `bytes` (the whole buffer: all_reduce and broadcast in place, all_gather's output,
// reduce_scatter's input, one send/recv), busbw = algbw x factor with factor 2(n-1)/n for
// all_reduce, (n-1)/n for all_gather and reduce_scatter, 1 for broadcast and sendrecv (a ring:
// rank r sends to r+1, receives from r-1). Inputs have closed-form results (rank r contributes
// r + 1; broadcast root 0 sends 42) so that a check counts wrong elements exactly.
// Used by bench_comm (local ranks) and ptdp_comm_bench (MPI).
#pragma once
#include <cstdint>

#include "core/comm/communicator.h"

namespace ptdp::bench {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, SendRecv };

inline const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

inline double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter: return double(n - 1) / n;
    case Coll::Broadcast:
    case Coll::SendRecv: return 1.0;
  }
  return 1.0;
}

// One rank's buffers and its call of the collective.
struct RankOp {
  Coll coll;
  int rank, n;
  int64_t count;  // f32 elements of the message
  Communicator* comm;
  Tensor a, b;    // a: in (and out in place), b: out or receive buffer

  void setup() {
    switch (coll) {
      case Coll::AllReduce:
      case Coll::Broadcast: a = Tensor::empty({count}, DType::F32); break;
      case Coll::AllGather:
        a = Tensor::empty({chunk_range(count, n, rank).size()}, DType::F32);
        b = Tensor::empty({count}, DType::F32);
        break;
      case Coll::ReduceScatter:
        a = Tensor::empty({count}, DType::F32);
        b = Tensor::empty({chunk_range(count, n, rank).size()}, DType::F32);
        break;
      case Coll::SendRecv:
        a = Tensor::empty({count}, DType::F32);
        b = Tensor::empty({count}, DType::F32);
        break;
    }
  }
  // Inputs whose results have a closed form (rank r contributes r + 1).
  void fill() {
    auto set = [](Tensor& t, float v) {
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
    };
    set(a, coll == Coll::Broadcast ? (rank == 0 ? 42.0f : 0.0f) : float(rank + 1));
    if (b.defined()) set(b, -1.0f);
  }
  void run() {
    switch (coll) {
      case Coll::AllReduce: comm->all_reduce(a, ReduceOp::Sum); break;
      case Coll::AllGather: comm->all_gather(a, b); break;
      case Coll::ReduceScatter: comm->reduce_scatter(a, b, ReduceOp::Sum); break;
      case Coll::Broadcast: comm->broadcast(a, 0); break;
      case Coll::SendRecv: {
        CommHandle s = comm->isend(a, (rank + 1) % n, 0);
        comm->recv(b, (rank + n - 1) % n, 0);
        s.wait();
        break;
      }
    }
  }
  int64_t wrong() const {
    int64_t w = 0;
    auto count_ne = [&](const Tensor& t, auto expected) {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) w += p[i] != expected(i);
    };
    const float sum = float(n * (n + 1) / 2);
    switch (coll) {
      case Coll::AllReduce: count_ne(a, [&](int64_t) { return sum; }); break;
      case Coll::ReduceScatter: count_ne(b, [&](int64_t) { return sum; }); break;
      case Coll::Broadcast: count_ne(a, [](int64_t) { return 42.0f; }); break;
      case Coll::SendRecv: count_ne(b, [&](int64_t) { return float((rank + n - 1) % n + 1); }); break;
      case Coll::AllGather:
        count_ne(b, [&](int64_t i) {
          int q = 0;
          while (!(i >= chunk_range(count, n, q).begin && i < chunk_range(count, n, q).end)) ++q;
          return float(q + 1);
        });
        break;
    }
    return w;
  }
};

}  // namespace ptdp::bench
