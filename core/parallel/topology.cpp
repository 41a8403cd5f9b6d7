#include "core/parallel/topology.h"

#include "core/common/error.h"

namespace ptdp {

Topology::Topology(int t, int p, int d) : t_(t), p_(p), d_(d) {
  PTDP_CHECK(t >= 1 && p >= 1 && d >= 1, "topology sizes must be positive");
}

Coords Topology::coords(int rank) const {
  PTDP_CHECK(rank >= 0 && rank < world(), "rank {} outside a world of {}", rank, world());
  return {rank % t_, (rank / t_) % d_, rank / (t_ * d_)};
}

int Topology::rank(Coords c) const { return c.tp + t_ * (c.dp + d_ * c.pp); }

std::vector<std::vector<int>> Topology::tp_groups() const {
  std::vector<std::vector<int>> g;
  for (int pp = 0; pp < p_; ++pp)
    for (int dp = 0; dp < d_; ++dp) {
      g.emplace_back();
      for (int tp = 0; tp < t_; ++tp) g.back().push_back(rank({tp, dp, pp}));
    }
  return g;
}

std::vector<std::vector<int>> Topology::dp_groups() const {
  std::vector<std::vector<int>> g;
  for (int pp = 0; pp < p_; ++pp)
    for (int tp = 0; tp < t_; ++tp) {
      g.emplace_back();
      for (int dp = 0; dp < d_; ++dp) g.back().push_back(rank({tp, dp, pp}));
    }
  return g;
}

std::vector<std::vector<int>> Topology::pp_groups() const {
  std::vector<std::vector<int>> g;
  for (int dp = 0; dp < d_; ++dp)
    for (int tp = 0; tp < t_; ++tp) {
      g.emplace_back();
      for (int pp = 0; pp < p_; ++pp) g.back().push_back(rank({tp, dp, pp}));
    }
  std::sort(g.begin(), g.end());
  return g;
}

std::vector<std::vector<int>> Topology::mp_groups() const {
  std::vector<std::vector<int>> g;
  for (int dp = 0; dp < d_; ++dp) {
    g.emplace_back();
    for (int pp = 0; pp < p_; ++pp)
      for (int tp = 0; tp < t_; ++tp) g.back().push_back(rank({tp, dp, pp}));
  }
  for (auto& v : g) std::sort(v.begin(), v.end());
  return g;
}

std::vector<std::vector<int>> Topology::embedding_groups() const {
  std::vector<std::vector<int>> g;
  for (const auto& pipe : pp_groups()) {
    if (pipe.size() == 1) g.push_back(pipe);
    else g.push_back({pipe.front(), pipe.back()});
  }
  return g;
}

ParallelGroups ParallelGroups::create(Communicator& world, const Topology& topo) {
  PTDP_CHECK(world.size() == topo.world(), "world of {} ranks for a {}x{}x{} topology", world.size(), topo.tp(),
             topo.pp(), topo.dp());
  ParallelGroups g;
  g.topo = topo;
  g.world = &world;
  const int r = world.rank();
  g.me = topo.coords(r);
  const Coords c = g.me;
  const int t = topo.tp(), d = topo.dp();
  g.tp = world.split(c.dp + d * c.pp, c.tp);
  g.dp = world.split(c.tp + t * c.pp, c.dp);
  g.pp = world.split(c.tp + t * c.dp, c.pp);
  g.mp = world.split(c.dp, r);
  const bool on_ends = c.pp == 0 || c.pp == topo.pp() - 1;
  auto emb = world.split(on_ends ? c.tp + t * c.dp : -1, c.pp);
  if (on_ends) g.embedding = std::move(emb);
  return g;
}

}  // namespace ptdp
