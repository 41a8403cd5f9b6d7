// Rank order and groups as Megatron's parallel_state documents them.
#include <gtest/gtest.h>

#include "core/comm/local/local_comm.h"
#include "core/parallel/topology.h"

namespace ptdp {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(Topology, ReproducesMegatronsDocumentedExample) {
  // 16 GPUs, t=2, p=4 (so d=2): megatron/core/parallel_state.py's docstring.
  Topology topo(2, 4, 2);
  EXPECT_EQ(topo.tp_groups(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(topo.dp_groups(), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(topo.pp_groups(), (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(topo.mp_groups(), (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  EXPECT_EQ(topo.embedding_groups(), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
}

TEST(Topology, ContextParallelRanksSitBetweenTensorAndDataAsInMegatronCore) {
  // 16 GPUs, t=2, c=2, p=2 (so d=2) in RankGenerator's order tp-cp-dp-pp:
  // rank = tp + 2 (cp + 2 (dp + 2 pp)).
  Topology topo(2, 2, 2, 2);
  EXPECT_EQ(topo.tp_groups(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(topo.cp_groups(), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(topo.dp_groups(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(topo.dp_cp_groups(), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(topo.pp_groups(),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(topo.mp_groups(), (Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}));
  EXPECT_EQ(topo.embedding_groups(), topo.pp_groups());  // p = 2: both stages are ends
  const Coords c = topo.coords(11);  // 11 = 1 + 2 (1 + 2 (0 + 2 * 1))
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
}

TEST(Topology, WithoutContextParallelismTheOrderIsUnchanged) {
  Topology a(2, 4, 2), b(2, 4, 2, 1);
  for (int r = 0; r < a.world(); ++r) EXPECT_EQ(b.rank(a.coords(r)), r);
  EXPECT_EQ(a.dp_cp_groups(), a.dp_groups());
  EXPECT_EQ(a.cp_groups().size(), size_t(16));  // one rank each
}

TEST(Topology, CoordsAndRanksAreInverse) {
  Topology topo(4, 3, 2);
  for (int r = 0; r < topo.world(); ++r) EXPECT_EQ(topo.rank(topo.coords(r)), r);
  Topology with_cp(2, 3, 2, 4);
  for (int r = 0; r < with_cp.world(); ++r) EXPECT_EQ(with_cp.rank(with_cp.coords(r)), r);
  EXPECT_EQ(topo.coords(5).tp, 1);
  EXPECT_EQ(topo.coords(5).dp, 1);
  EXPECT_EQ(topo.coords(8).pp, 1);
}

TEST(Topology, CommunicatorGroupsMatchTheGroupLists) {
  Topology topo(2, 2, 2);
  run_local_ranks(8, [&](int r, Communicator& world) {
    ParallelGroups g = ParallelGroups::create(world, topo);
    // Sum of member ranks in each group, through the group's own all-reduce.
    auto sum_of = [&](Communicator& c) {
      Tensor x = Tensor::empty({1}, DType::I32);
      x.data<int32_t>()[0] = r;
      c.all_reduce(x, ReduceOp::Sum);
      return x.data<int32_t>()[0];
    };
    auto expected = [&](const Groups& gs) {
      for (const auto& grp : gs)
        if (std::find(grp.begin(), grp.end(), r) != grp.end()) {
          int s = 0;
          for (int m : grp) s += m;
          return s;
        }
      return -1;
    };
    EXPECT_EQ(sum_of(*g.tp), expected(topo.tp_groups()));
    EXPECT_EQ(sum_of(*g.dp), expected(topo.dp_groups()));
    EXPECT_EQ(sum_of(*g.pp), expected(topo.pp_groups()));
    EXPECT_EQ(sum_of(*g.mp), expected(topo.mp_groups()));
    ASSERT_TRUE(g.embedding);  // p=2: every stage is first or last
    EXPECT_EQ(sum_of(*g.embedding), expected(topo.embedding_groups()));
    EXPECT_EQ(g.tp->rank(), g.me.tp);
    EXPECT_EQ(g.dp->rank(), g.me.dp);
    EXPECT_EQ(g.pp->rank(), g.me.pp);
    EXPECT_FALSE(g.cp);  // c = 1
  });
}

TEST(Topology, ContextParallelCommunicatorsMatchTheGroupLists) {
  Topology topo(2, 2, 1, 2);  // t=2, p=2, d=1, c=2
  run_local_ranks(8, [&](int r, Communicator& world) {
    ParallelGroups g = ParallelGroups::create(world, topo);
    auto members = [&](Communicator& c) {  // the group's ranks, through its all-gather
      Tensor mine = Tensor::empty({1}, DType::I32), all = Tensor::empty({c.size()}, DType::I32);
      mine.data<int32_t>()[0] = r;
      c.all_gather(mine, all);
      return std::vector<int>(all.data<int32_t>(), all.data<int32_t>() + c.size());
    };
    auto group_of = [&](const Groups& gs) {
      for (const auto& grp : gs)
        if (std::find(grp.begin(), grp.end(), r) != grp.end()) return grp;
      return std::vector<int>{};
    };
    ASSERT_TRUE(g.cp);
    EXPECT_EQ(members(*g.cp), group_of(topo.cp_groups()));
    EXPECT_EQ(members(*g.dp_cp), group_of(topo.dp_cp_groups()));
    EXPECT_EQ(members(*g.dp), group_of(topo.dp_groups()));
    EXPECT_EQ(members(*g.tp), group_of(topo.tp_groups()));
    EXPECT_EQ(members(*g.mp), group_of(topo.mp_groups()));
    EXPECT_EQ(members(*g.pp), group_of(topo.pp_groups()));
    EXPECT_EQ(g.cp->rank(), g.me.cp);
  });
}

}  // namespace
}  // namespace ptdp
