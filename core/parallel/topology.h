// Where each rank sits in the grid, in Megatron-core's order (RankGenerator "tp-cp-dp-pp"):
// tensor-parallel ranks are adjacent (inside a node), then context-parallel, then data-parallel,
// then pipeline:
//   rank = tp + t * (cp + c * (dp + d * pp))
// and the process groups built from it (TP, CP, DP, the combined data-and-context group DP x CP
// that reduces and shards gradients, PP, model-parallel = TP x PP, embedding = first and last
// stage of each pipeline).
#pragma once
#include <memory>
#include <vector>

#include "core/comm/communicator.h"

namespace ptdp {

struct Coords {
  int tp = 0, dp = 0, pp = 0, cp = 0;
};

class Topology {
 public:
  Topology(int t, int p, int d, int c = 1);
  int tp() const { return t_; }
  int pp() const { return p_; }
  int dp() const { return d_; }
  int cp() const { return c_; }
  int world() const { return t_ * c_ * p_ * d_; }
  Coords coords(int rank) const;
  int rank(Coords c) const;

  // Every group of each kind, as lists of global ranks (each list in rank order).
  std::vector<std::vector<int>> tp_groups() const;
  std::vector<std::vector<int>> cp_groups() const;         // same tp, dp, pp
  std::vector<std::vector<int>> dp_groups() const;         // same tp, cp, pp
  std::vector<std::vector<int>> dp_cp_groups() const;      // same tp, pp: data and context together
  std::vector<std::vector<int>> pp_groups() const;
  std::vector<std::vector<int>> mp_groups() const;         // model-parallel: same dp and cp index
  std::vector<std::vector<int>> embedding_groups() const;  // first and last stage of each pipeline

 private:
  // The ranks of every group whose members vary only in the dimensions `in` says.
  std::vector<std::vector<int>> groups(bool tp, bool cp, bool dp, bool pp) const;
  int t_, p_, d_, c_;
};

// The communicators of one rank, split from the world communicator.
struct ParallelGroups {
  Topology topo{1, 1, 1};
  Coords me;
  Communicator* world = nullptr;  // not owned
  std::unique_ptr<Communicator> tp, dp, pp, mp, embedding;  // embedding: null off the first/last stage
  std::unique_ptr<Communicator> cp;     // null when c = 1
  std::unique_ptr<Communicator> dp_cp;  // data x context: gradient reduction and ZeRO sharding
  static ParallelGroups create(Communicator& world, const Topology& topo);
};

}  // namespace ptdp
