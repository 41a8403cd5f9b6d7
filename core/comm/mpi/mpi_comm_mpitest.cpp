// Tests of the MPI communicator, run under mpirun by ctest (see core/CMakeLists.txt):
//   mpirun -np 4 ptdp_mpi_tests               collectives, split, (t=2, d=2) training equivalence
//   mpirun -np 3 ptdp_mpi_tests --fault-hang  rank 1 skips an all-reduce: the others must stop
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/comm/mpi/mpi_comm.h"
#include "core/parallel/topology.h"
#include "core/testing/parallel_run.h"

namespace ptdp {
namespace {

Communicator* g_world = nullptr;

float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 29) - 14.0f; }

class MpiCollectives : public ::testing::TestWithParam<int64_t> {};

TEST_P(MpiCollectives, MatchSerialReference) {
  Communicator& c = *g_world;
  const int n = c.size(), r = c.rank();
  const int64_t count = GetParam();
  Tensor x = Tensor::empty({count}, DType::F32);
  for (int64_t i = 0; i < count; ++i) x.data<float>()[i] = value(r, i);
  Tensor y = x.clone(), in = x.clone();
  c.all_reduce(x, ReduceOp::Sum);
  c.all_reduce(y, ReduceOp::Max);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    float s = 0, m = -1e30f;
    for (int q = 0; q < n; ++q) s += value(q, i), m = std::max(m, value(q, i));
    wrong += x.data<float>()[i] != s || y.data<float>()[i] != m;
  }
  EXPECT_EQ(wrong, 0);
  Tensor part = Tensor::empty({chunk_range(count, n, r).size()}, DType::F32);
  c.reduce_scatter(in, part, ReduceOp::Sum);
  Tensor full = Tensor::empty({count}, DType::F32);
  c.all_gather(part, full);
  EXPECT_EQ(std::memcmp(full.raw(), x.raw(), x.nbytes()), 0);
  Tensor b = in.clone();
  c.broadcast(b, n - 1);
  wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += b.data<float>()[i] != value(n - 1, i);
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, MpiCollectives, ::testing::Values<int64_t>(1, 7, 1000, 1 << 20));

TEST(MpiComm, SendRecvAndSplit) {
  Communicator& c = *g_world;
  const int n = c.size(), r = c.rank();
  Tensor t = Tensor::empty({3}, DType::F64);
  t.data<double>()[0] = r;
  CommHandle s = c.isend(t, (r + 1) % n, 5);
  Tensor got = Tensor::empty({3}, DType::F64);
  c.recv(got, (r + n - 1) % n, 5);
  s.wait();
  EXPECT_EQ(got.data<double>()[0], (r + n - 1) % n);
  auto sub = c.split(r % 2, -r);
  Tensor x = Tensor::empty({1}, DType::I32);
  x.data<int32_t>()[0] = r;
  sub->all_reduce(x, ReduceOp::Sum);
  int expect = 0;
  for (int q = 0; q < n; ++q)
    if (q % 2 == r % 2) expect += q;
  EXPECT_EQ(x.data<int32_t>()[0], expect);
}

// The training check under mpirun: losses and final weights against one rank in this process.
void expect_matches_one_rank(const ModelConfig& c, const TrainConfig& tc, const testing::Layout& layout) {
  testing::RunResult ref = testing::train_parallel(c, tc, testing::Layout{}, 3, 21);
  testing::RunResult got = testing::train_on_world(*g_world, c, tc, layout, 3, 21);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-5 * ref.losses[i]) << i;
  testing::WeightDiff d = testing::compare_weights(ref, got);
  EXPECT_LT(d.whole, 1e-5);
  EXPECT_LT(d.worst_tensor, 1e-3) << d.worst_name;
}

TEST(MpiTraining, TensorAndDataParallelMatchOneRank) {
  if (g_world->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  TrainConfig tc;
  tc.micro_batch = 2;
  tc.global_batch = 8;
  testing::Layout l;
  l.tp = 2, l.dp = 2;
  expect_matches_one_rank(preset_config("tiny"), tc, l);
}

// The distributed optimizer over MPI's reduce-scatter and all-gather: d = 4 (several buckets,
// overlapped), and d = 2 with t = 2.
TEST(MpiTraining, DistributedOptimizerMatchesOneRank) {
  if (g_world->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  TrainConfig tc;
  tc.micro_batch = 2;
  tc.global_batch = 8;
  testing::Layout l;
  l.dp = 4, l.zero = 1, l.bucket_elems = 30001, l.overlap = true;
  expect_matches_one_rank(preset_config("tiny"), tc, l);
  testing::Layout t2;
  t2.tp = 2, t2.dp = 2, t2.zero = 1;
  expect_matches_one_rank(preset_config("tiny"), tc, t2);
}

// Sequence parallelism over MPI's all-gather and reduce-scatter: t = 2, d = 2, and t = 2, p = 2
// (n/t rows between the stages), selective recomputation.
TEST(MpiTraining, SequenceParallelMatchesOneRank) {
  if (g_world->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  TrainConfig tc;
  tc.micro_batch = 2;
  tc.global_batch = 8;
  testing::Layout l;
  l.tp = 2, l.dp = 2, l.sequence_parallel = true;
  expect_matches_one_rank(preset_config("tiny"), tc, l);
  testing::Layout pipe;
  pipe.tp = 2, pipe.pp = 2, pipe.sequence_parallel = true, pipe.recompute = Recompute::Selective;
  expect_matches_one_rank(preset_config("tiny"), tc, pipe);
}

// ZeRO-3 over MPI: the layer-by-layer gathers and reduce-scatters on 4 processes.
TEST(MpiTraining, Zero3MatchesOneRank) {
  if (g_world->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  TrainConfig tc;
  tc.micro_batch = 1;
  tc.global_batch = 8;
  tc.recompute = Recompute::Full;
  testing::Layout l;
  l.dp = 4, l.zero = 3, l.recompute = Recompute::Full;
  expect_matches_one_rank(preset_config("tiny"), tc, l);
}

TEST(MpiTraining, InterleavedPtdpMatchesOneRank) {
  if (g_world->size() != 8) GTEST_SKIP() << "needs mpirun -np 8";
  ModelConfig c = preset_config("tiny");
  c.layers = 8;
  TrainConfig tc;
  tc.micro_batch = 1;
  tc.global_batch = 8;
  testing::Layout l;
  l.tp = 2, l.pp = 2, l.dp = 2, l.vpp = 2, l.schedule = ScheduleKind::Interleaved;
  expect_matches_one_rank(c, tc, l);
  l.zero = 1;  // the distributed optimizer with every dimension
  expect_matches_one_rank(c, tc, l);
}

// Rank 1 never joins the all-reduce; the others must end the job with a message.
int fault_hang(Communicator& world) {
  world.set_timeout(std::chrono::milliseconds(500));
  Tensor x = Tensor::zeros({8}, DType::F32);
  if (world.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(20));  // alive but absent
    return 0;
  }
  world.all_reduce(x, ReduceOp::Sum);
  return 0;
}

// Rank 1 fails while the others wait in an all-reduce (timeout 300 s): it names its cause and
// aborts, as ptdp does for a failure in a training step; the job must end within seconds.
int fault_throw(Communicator& world) {
  Tensor x = Tensor::zeros({8}, DType::F32);
  world.all_reduce(x, ReduceOp::Sum);
  if (world.rank() == 1) {
    try {
      throw std::runtime_error("injected failure in a step of rank 1");
    } catch (const std::exception& e) {
      world.abort(e.what());
    }
  }
  world.all_reduce(x, ReduceOp::Sum);
  return 0;
}

// Rank 1 exits in the middle of the job; mpirun must end the others (they would wait forever).
int fault_exit(Communicator& world) {
  Tensor x = Tensor::zeros({8}, DType::F32);
  world.all_reduce(x, ReduceOp::Sum);
  if (world.rank() == 1) std::_Exit(3);
  world.all_reduce(x, ReduceOp::Sum);
  return 0;
}

}  // namespace

Communicator& mpi_test_world() { return *g_world; }

}  // namespace ptdp

int main(int argc, char** argv) {
  ptdp::MpiSession session(&argc, &argv);
  auto world = session.world();
  ptdp::g_world = world.get();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--fault-hang") == 0) return ptdp::fault_hang(*world);
    else if (std::strcmp(argv[i], "--fault-exit") == 0) return ptdp::fault_exit(*world);
    else if (std::strcmp(argv[i], "--fault-throw") == 0) return ptdp::fault_throw(*world);
  ::testing::InitGoogleTest(&argc, argv);
  if (world->rank() != 0) {  // one report, from rank 0; every rank's failures still fail its exit code
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
