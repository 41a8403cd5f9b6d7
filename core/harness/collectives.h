// The collectives of the Communicator interface as nccl-tests measures them: for a message of
// `count` f32 elements (the whole buffer: all_reduce and broadcast in place, all_gather's output,
// reduce_scatter's input, one send/recv), busbw = algbw x bus_factor, with 2(n-1)/n for
// all_reduce, (n-1)/n for all_gather and reduce_scatter, 1 for broadcast and sendrecv (a ring:
// rank r sends to r+1, receives from r-1). Inputs have closed-form results (rank r contributes
// r + 1; broadcast's root 0 sends 42), so that a check counts wrong elements exactly. Used by
// `ptdp accept` (in a node and between nodes), bench_comm, ptdp_comm_bench and bench_nccl.
#pragma once
#include <cstdint>
#include <functional>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/harness/harness.h"

namespace ptdp::harness {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, SendRecv };

const char* coll_name(Coll c);
double bus_factor(Coll c, int ranks);

// One rank's buffers and its call of the collective over `comm`; buffers in host memory, or
// where `be` computes (a GPU's memory, for a communicator that takes device tensors).
struct Collective {
  Coll coll;
  Communicator* comm;
  int64_t count;          // f32 elements of the message
  Backend* be = nullptr;  // null: host memory
  Tensor a{}, b{};        // a: in (and out in place), b: out or the receive buffer

  void setup();                // allocates a and b
  void fill();                 // the inputs; outputs -1
  void run();                  // one call
  int64_t wrong() const;       // this rank's output elements that differ from the closed form
  // setup and fill as init, run, wrong as the check; bytes of the message and the bus factor.
  // The workload refers to this object, which must outlive it and stay where it is.
  Workload workload();
};

// Collective helpers over the ranks of `world`: the sum of `v`, the maximum of `v`.
int64_t sum_over_ranks(Communicator& world, int64_t v);
double max_over_ranks(Communicator& world, double v);

// The host's clock, the slowest rank's time: each rank of `world` times its calls and they take
// the maximum (a collective, so every rank gets the same seconds).
Clock slowest_rank_clock(Communicator& world, std::function<void()> ready = {});

}  // namespace ptdp::harness
