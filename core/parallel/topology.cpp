#include "core/parallel/topology.h"

#include <algorithm>

#include "core/common/error.h"

namespace ptdp {

Topology::Topology(int t, int p, int d, int c) : t_(t), p_(p), d_(d), c_(c) {
  PTDP_CHECK(t >= 1 && p >= 1 && d >= 1 && c >= 1, "topology sizes must be positive");
}

Coords Topology::coords(int rank) const {
  PTDP_CHECK(rank >= 0 && rank < world(), "rank {} outside a world of {}", rank, world());
  Coords c;
  c.tp = rank % t_;
  c.cp = (rank / t_) % c_;
  c.dp = (rank / (t_ * c_)) % d_;
  c.pp = rank / (t_ * c_ * d_);
  return c;
}

int Topology::rank(Coords c) const { return c.tp + t_ * (c.cp + c_ * (c.dp + d_ * c.pp)); }

std::vector<std::vector<int>> Topology::groups(bool tp, bool cp, bool dp, bool pp) const {
  // Members: every rank with the same coordinates outside the group's dimensions.
  std::vector<std::vector<int>> g;
  for (int r = 0; r < world(); ++r) {
    const Coords c = coords(r);
    Coords key{tp ? 0 : c.tp, dp ? 0 : c.dp, pp ? 0 : c.pp, cp ? 0 : c.cp};
    const int head = rank(key);  // the group's first member
    bool placed = false;
    for (auto& grp : g)
      if (grp.front() == head) {
        grp.push_back(r);
        placed = true;
      }
    if (!placed) g.push_back({r});
  }
  std::sort(g.begin(), g.end());
  return g;
}

std::vector<std::vector<int>> Topology::tp_groups() const { return groups(true, false, false, false); }
std::vector<std::vector<int>> Topology::cp_groups() const { return groups(false, true, false, false); }
std::vector<std::vector<int>> Topology::dp_groups() const { return groups(false, false, true, false); }
std::vector<std::vector<int>> Topology::dp_cp_groups() const { return groups(false, true, true, false); }
std::vector<std::vector<int>> Topology::pp_groups() const { return groups(false, false, false, true); }
std::vector<std::vector<int>> Topology::mp_groups() const { return groups(true, false, false, true); }

std::vector<std::vector<int>> Topology::embedding_groups() const {
  std::vector<std::vector<int>> g;
  for (const auto& pipe : pp_groups()) {
    if (pipe.size() == 1) g.push_back(pipe);
    else g.push_back({pipe.front(), pipe.back()});
  }
  return g;
}

ParallelGroups ParallelGroups::create(Communicator& world, const Topology& topo) {
  PTDP_CHECK(world.size() == topo.world(), "world of {} ranks for a {}x{}x{}x{} (t, c, p, d) topology", world.size(),
             topo.tp(), topo.cp(), topo.pp(), topo.dp());
  ParallelGroups g;
  g.topo = topo;
  g.world = &world;
  const int r = world.rank();
  g.me = topo.coords(r);
  const Coords c = g.me;
  // A group's colour: the rank of its first member (the coordinates outside it, the rest zero).
  auto colour = [&](bool tp, bool cp, bool dp, bool pp) {
    return topo.rank({tp ? 0 : c.tp, dp ? 0 : c.dp, pp ? 0 : c.pp, cp ? 0 : c.cp});
  };
  g.tp = world.split(colour(true, false, false, false), c.tp);
  auto cp = world.split(colour(false, true, false, false), c.cp);
  if (topo.cp() > 1) g.cp = std::move(cp);
  g.dp = world.split(colour(false, false, true, false), c.dp);
  g.dp_cp = world.split(colour(false, true, true, false), c.cp + topo.cp() * c.dp);
  g.pp = world.split(colour(false, false, false, true), c.pp);
  g.mp = world.split(colour(true, false, false, true), r);
  const bool on_ends = c.pp == 0 || c.pp == topo.pp() - 1;
  auto emb = world.split(on_ends ? colour(false, false, false, true) : -1, c.pp);
  if (on_ends) g.embedding = std::move(emb);
  return g;
}

}  // namespace ptdp
