// Faults during training end with a message, never a hang: a NaN stops the run naming the
// iteration and rank (or skips the step with skip_nonfinite); a rank that fails or vanishes
// stops the others within the timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <cmath>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/parallel/topology.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"

namespace ptdp {
namespace {

// t=2, p=2 on 4 local ranks; `hook(rank, iteration, model)` runs before each step.
void run(bool skip, const std::function<void(int, int, StageModel&)>& hook, std::vector<IterStats>* stats,
         std::chrono::milliseconds timeout = std::chrono::seconds(300)) {
  const Topology topo(2, 2, 1);
  const ModelConfig c = preset_config("tiny");
  run_local_ranks(
      4,
      [&](int rank, Communicator& world) {
        set_cpu_threads(1);
        ParallelGroups g = ParallelGroups::create(world, topo);
        auto be = make_cpu_backend();
        StageModel m = build_stage_model(c, 2, g.me.tp, 2, g.me.pp, 1, *be, g.tp.get(), 1);
        SyntheticSamples data(c.vocab_size, c.seq_length, 1);
        TrainConfig tc;
        tc.micro_batch = 1;
        tc.global_batch = 4;
        tc.skip_nonfinite = skip;
        Trainer trainer(m.pointers(), data, tc,
                        TrainerGroups{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get(), &world});
        for (int it = 1; it <= 3; ++it) {
          hook(rank, it, m);
          IterStats st = trainer.step();
          if (rank == 0 && stats) stats->push_back(st);
        }
      },
      timeout);
}

TEST(Faults, NaNStopsTheRunNamingIterationAndRank) {
  try {
    run(false,
        [](int rank, int it, StageModel& m) {
          if (rank == 3 && it == 2) m.chunks[0]->params().data<float>()[5] = NAN;  // a weight on rank 3
        },
        nullptr);
    FAIL() << "the NaN went unnoticed";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("iteration 2: non-finite loss or gradients on rank"), std::string::npos)
        << e.what();
  }
}

TEST(Faults, NaNSkipsTheStepWhenAsked) {
  std::vector<IterStats> stats;
  run(true,
      [](int, int it, StageModel& m) {
        // Every rank's gradients become NaN in iteration 2 through a NaN input weight on stage 0.
        if (it == 2 && m.chunks[0]->shard().pre) m.chunks[0]->param("wpe").data<float>()[0] = NAN;
        if (it == 3 && m.chunks[0]->shard().pre) m.chunks[0]->param("wpe").data<float>()[0] = 0.0f;
      },
      &stats);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_FALSE(stats[0].skipped);
  EXPECT_TRUE(stats[1].skipped);
  EXPECT_FALSE(stats[2].skipped);
  EXPECT_TRUE(std::isfinite(stats[2].loss));
}

TEST(Faults, ARankThatFailsStopsTheOthersAtOnce) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run(false,
        [](int rank, int it, StageModel&) {
          if (rank == 2 && it == 2) throw RuntimeError("injected failure of rank 2");
        },
        nullptr);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure of rank 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));  // not the 300 s timeout
}

TEST(Faults, ARankThatVanishesStopsTheOthersWithinTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run(false,
        [](int rank, int it, StageModel&) {
          if (rank == 1 && it == 2) std::this_thread::sleep_for(std::chrono::seconds(3));  // hangs past the timeout
        },
        nullptr, std::chrono::milliseconds(500));
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("did not"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ptdp
