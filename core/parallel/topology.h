// Where each rank sits in the PTD-P grid, in Megatron's order: tensor-parallel ranks are
// adjacent (inside a node), then data-parallel, then pipeline:
//   rank = tp + t * (dp + d * pp)
// and the process groups built from it (TP, DP, PP, model-parallel = TP x PP, embedding =
// first and last stage of each pipeline).
#pragma once
#include <memory>
#include <vector>

#include "core/comm/communicator.h"

namespace ptdp {

struct Coords {
  int tp = 0, dp = 0, pp = 0;
};

class Topology {
 public:
  Topology(int t, int p, int d);
  int tp() const { return t_; }
  int pp() const { return p_; }
  int dp() const { return d_; }
  int world() const { return t_ * p_ * d_; }
  Coords coords(int rank) const;
  int rank(Coords c) const;

  // Every group of each kind, as lists of global ranks (each list in rank order).
  std::vector<std::vector<int>> tp_groups() const;
  std::vector<std::vector<int>> dp_groups() const;
  std::vector<std::vector<int>> pp_groups() const;
  std::vector<std::vector<int>> mp_groups() const;         // model-parallel: same dp index
  std::vector<std::vector<int>> embedding_groups() const;  // first and last stage of each pipeline

 private:
  int t_, p_, d_;
};

// The communicators of one rank, split from the world communicator.
struct ParallelGroups {
  Topology topo{1, 1, 1};
  Coords me;
  Communicator* world = nullptr;  // not owned
  std::unique_ptr<Communicator> tp, dp, pp, mp, embedding;  // embedding: null off the first/last stage
  static ParallelGroups create(Communicator& world, const Topology& topo);
};

}  // namespace ptdp
