#include "core/harness/collectives.h"

#include <utility>

namespace ptdp::harness {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

double bus_factor(Coll c, int ranks) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (ranks - 1) / ranks;
    case Coll::AllGather:
    case Coll::ReduceScatter: return double(ranks - 1) / ranks;
    case Coll::Broadcast:
    case Coll::SendRecv: return 1.0;
  }
  return 1.0;
}

void Collective::setup() {
  const int n = comm->size(), rank = comm->rank();
  const int64_t chunk = chunk_range(count, n, rank).size();
  const int64_t in = coll == Coll::AllGather ? chunk : count;
  const int64_t out = coll == Coll::ReduceScatter                            ? chunk
                      : coll == Coll::AllGather || coll == Coll::SendRecv ? count
                                                                          : 0;
  auto alloc = [&](int64_t elems) { return be ? be->empty({elems}, DType::F32) : Tensor::empty({elems}, DType::F32); };
  a = alloc(in);
  b = out > 0 ? alloc(out) : Tensor();
}

void Collective::fill() {
  auto set = [&](Tensor& t, float v) {
    if (be) return be->fill(t, v);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  };
  const int rank = comm->rank();
  set(a, coll == Coll::Broadcast ? (rank == 0 ? 42.0f : 0.0f) : float(rank + 1));
  if (b.defined()) set(b, -1.0f);
}

void Collective::run() {
  const int n = comm->size(), rank = comm->rank();
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

int64_t Collective::wrong() const {
  const int n = comm->size(), rank = comm->rank();
  int64_t w = 0;
  auto count_ne = [&](const Tensor& t, auto expected) {
    const Tensor host = be ? to_host(*be, t) : t;
    const float* p = host.data<float>();
    for (int64_t i = 0; i < host.numel(); ++i) w += p[i] != expected(i);
  };
  const float sum = float(n * (n + 1) / 2);
  switch (coll) {
    case Coll::AllReduce: count_ne(a, [&](int64_t) { return sum; }); break;
    case Coll::ReduceScatter: count_ne(b, [&](int64_t) { return sum; }); break;
    case Coll::Broadcast: count_ne(a, [](int64_t) { return 42.0f; }); break;
    case Coll::SendRecv: count_ne(b, [&](int64_t) { return float((rank + n - 1) % n + 1); }); break;
    case Coll::AllGather:
      count_ne(b, [&, q = 0](int64_t i) mutable {  // the rank whose chunk holds element i (i rises)
        while (i >= chunk_range(count, n, q).end) ++q;
        return float(q + 1);
      });
      break;
  }
  return w;
}

Workload Collective::workload() {
  Workload w;
  w.work = double(count) * sizeof(float);
  w.bus_factor = bus_factor(coll, comm->size());
  w.init = [this] {
    setup();
    fill();
  };
  w.run = [this] { run(); };
  w.check = [this] { return wrong(); };
  return w;
}

int64_t sum_over_ranks(Communicator& world, int64_t v) {
  Tensor t = Tensor::empty({1}, DType::F64);
  t.data<double>()[0] = double(v);
  world.all_reduce(t, ReduceOp::Sum);
  return int64_t(t.data<double>()[0]);
}

double max_over_ranks(Communicator& world, double v) {
  Tensor t = Tensor::empty({1}, DType::F64);
  t.data<double>()[0] = v;
  world.all_reduce(t, ReduceOp::Max);
  return t.data<double>()[0];
}

Clock slowest_rank_clock(Communicator& world, std::function<void()> ready) {
  Clock host = host_clock(std::move(ready));
  host.time = [&world, mine = host.time](const std::function<void()>& calls) {
    return max_over_ranks(world, mine(calls));
  };
  return host;
}

}  // namespace ptdp::harness
