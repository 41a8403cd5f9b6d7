// The megatron-deepspeed stack: DeepSpeed's TrainSchedule as actions, the replay's rendezvous
// transfers, what the stack refuses, and what its mechanisms cost next to Megatron's code.
#include "core/sim/deepspeed_schedule.h"

#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/sim/memory_model.h"
#include "core/sim/paper_setups.h"
#include "core/sim/planner.h"
#include "core/sim/replay.h"
#include "core/sim/simulator.h"
#include "core/sim/stack.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

std::vector<Action> compute_only(const std::vector<Action>& acts) {
  std::vector<Action> out;
  for (const Action& a : acts)
    if (a.op == Op::Forward || a.op == Op::Backward) out.push_back(a);
  return out;
}

const std::vector<std::pair<int, int>> kShapes = {{1, 1}, {1, 4}, {2, 1}, {2, 3}, {3, 2}, {4, 8}, {5, 5}, {8, 32}, {12, 16}};

// DeepSpeed's lock-step schedule computes in 1F1B's order (p - s forwards in flight at most), and
// each stage receives every forward and gradient it needs and sends each once.
TEST(DeepSpeedSchedule, ComputesIn1F1BOrderAndSendsEachTensorOnce) {
  for (const auto& [p, m] : kShapes) {
    for (int s = 0; s < p; ++s) {
      const auto acts = deepspeed_train_schedule(p, m, s);
      EXPECT_EQ(compute_only(acts), compute_only(make_schedule(ScheduleKind::OneFOneB, p, m, 1, s)))
          << "p=" << p << " m=" << m << " stage " << s;
      int counts[6] = {};
      for (const Action& a : acts) ++counts[int(a.op)];
      EXPECT_EQ(counts[int(Op::RecvForward)], s > 0 ? m : 0);
      EXPECT_EQ(counts[int(Op::SendBackward)], s > 0 ? m : 0);
      EXPECT_EQ(counts[int(Op::SendForward)], s < p - 1 ? m : 0);
      EXPECT_EQ(counts[int(Op::RecvBackward)], s < p - 1 ? m : 0);
    }
  }
  // p = 4, stage 0: F0 F1 F2 F3 B0 F4 B1 ..., the first send of F0's output in the step after it.
  const auto s0 = deepspeed_train_schedule(4, 8, 0);
  EXPECT_EQ(s0[0], (Action{Op::Forward, 0, 0}));
  EXPECT_EQ(s0[1], (Action{Op::SendForward, 0, 0}));
}

ReplayInput uniform(int p, int m, double f, double b, double transfer, bool deepspeed) {
  ReplayInput in;
  in.p = p;
  in.m = m;
  in.costs.assign(size_t(p), ChunkCosts{f, b, transfer, transfer, transfer, transfer, 0, 0});
  if (deepspeed) {
    in.rendezvous = true;
    for (int s = 0; s < p; ++s) in.actions.push_back(deepspeed_train_schedule(p, m, s));
  }
  return in;
}

// Blocking transfers never deadlock DeepSpeed's schedule; with free transfers it takes 1F1B's
// (m + p - 1)(F + B); with costly ones it loses more than Megatron's 1F1B, whose sends do not
// wait for the receiver (4 serialised transfers a micro-batch on an interior stage, not 2).
TEST(DeepSpeedSchedule, BlockingTransfersNeverDeadlockAndCostMoreThanMegatrons) {
  for (const auto& [p, m] : kShapes) {
    const ReplayResult free = replay(uniform(p, m, 1.0, 2.0, 0.0, true));
    ASSERT_FALSE(free.deadlock) << free.deadlock_detail;
    EXPECT_NEAR(free.makespan, (m + p - 1) * 3.0, 1e-9) << "p=" << p << " m=" << m;
  }
  const double ds = replay(uniform(8, 32, 1.0, 2.0, 0.1, true)).makespan;
  const double megatron = replay(uniform(8, 32, 1.0, 2.0, 0.1, false)).makespan;
  EXPECT_GT(ds, megatron * 1.02);
  EXPECT_LT(ds, megatron * 1.5);
}

// A rendezvous starts when both sides are there and occupies both: the early sender waits.
TEST(DeepSpeedSchedule, ARendezvousOccupiesBothSidesFromTheLaterOne) {
  ReplayInput in;
  in.p = 2;
  in.m = 1;
  in.rendezvous = true;
  in.costs = {ChunkCosts{1.0, 0, 0.5, 0.5, 0, 0, 0, 0}, ChunkCosts{2.0, 0, 0, 0, 0, 0, 0, 0}};
  // Stage 1 computes for 2 s before it reaches its receive; stage 0 sends after 1 s.
  in.actions = {{{Op::Forward, 0, 0}, {Op::SendForward, 0, 0}}, {{Op::Forward, 0, 0}, {Op::RecvForward, 0, 0}}};
  const ReplayResult r = replay(in);
  ASSERT_FALSE(r.deadlock);
  EXPECT_DOUBLE_EQ(r.stages[0].finish, 2.5);  // waited 1 s for the receiver, then 0.5 s of transfer
  EXPECT_DOUBLE_EQ(r.stages[0].wait, 1.0);
  EXPECT_DOUBLE_EQ(r.stages[1].finish, 2.5);
  EXPECT_DOUBLE_EQ(r.stages[1].wait, 0.0);
  // Two stages that both send first wait for each other forever, and the replay says so.
  in.actions = {{{Op::SendForward, 0, 0}, {Op::RecvBackward, 0, 0}}, {{Op::SendBackward, 0, 0}, {Op::RecvForward, 0, 0}}};
  const ReplayResult dead = replay(in);
  EXPECT_TRUE(dead.deadlock);
  EXPECT_NE(dead.deadlock_detail.find("stage 0 waits at SendForward"), std::string::npos) << dead.deadlock_detail;
}

RunConfig deepspeed_run(Precision precision) {
  // BLOOM's layout on A100s: t 4, p 12, d 8, b 2, B 2048, full recomputation.
  RunConfig c = paper_run(72, 14336, 112, 4, 12, 8, 2, 2048);
  c.stack = StackKind::MegatronDeepspeed;
  c.precision = precision;
  c.par.zero = 1;
  return c;
}

std::string refusal_of(RunConfig c) {
  try {
    checked_stack(c);
    return {};
  } catch (const UsageError& e) {
    return e.what();
  }
}

TEST(DeepSpeedStack, RefusesWhatDeepSpeedsPipelineEngineDoesNotHave) {
  RunConfig c = deepspeed_run(Precision::Bf16);
  EXPECT_EQ(refusal_of(c), "");
  RunConfig x = c;
  x.par.schedule = ScheduleKind::Interleaved;
  x.par.vpp = 2;
  EXPECT_NE(refusal_of(x).find("--schedule interleaved: --stack megatron-deepspeed runs DeepSpeed's pipeline engine"),
            std::string::npos);
  x = c;
  x.par.schedule = ScheduleKind::GPipe;
  EXPECT_NE(refusal_of(x).find("use --schedule 1f1b"), std::string::npos);
  x = c;
  x.par.zero = 0;
  EXPECT_NE(refusal_of(x).find("--precision bf16 with --zero 0: --stack megatron-deepspeed trains bf16 with "
                               "DeepSpeed's BF16_Optimizer"),
            std::string::npos);
  x.precision = Precision::F16;
  EXPECT_EQ(refusal_of(x), "");  // fp16 without ZeRO: FP16_Optimizer, replicated
  x = c;
  x.par.zero = 3;
  EXPECT_NE(refusal_of(x).find("refuses ZeRO-2 and ZeRO-3 with a pipeline"), std::string::npos);
  x = c;
  x.par.sequence_parallel = true;
  EXPECT_NE(refusal_of(x).find("--stack megatron-deepspeed has no sequence parallelism"), std::string::npos);
}

// Against Megatron's 2021 code on the same layout (the same kernels): the engine's extra
// gathers, host syncs, blocking transfers and bf16 gradient buffer make it slower, by a few per
// cent, not by tens; it holds the fp32 gradients unsharded and frees what it sent.
TEST(DeepSpeedStack, CostsMoreThanMegatronOnTheSameLayout) {
  RunConfig ds = deepspeed_run(Precision::Bf16);
  RunConfig mg = ds;
  mg.stack = StackKind::Megatron2021;
  const HardwareProfile& hw = selene();
  const CostModel dcm(ds, hw), mcm(mg, hw);
  EXPECT_GT(dcm.host_sync, 0.0);
  EXPECT_GT(dcm.meta_cross, 0.0);
  EXPECT_EQ(mcm.host_sync, 0.0);
  EXPECT_EQ(dcm.tied_grad_bytes, 4);  // BF16_Optimizer's fp32 buffer
  EXPECT_EQ(mcm.tied_grad_bytes, 2);
  EXPECT_DOUBLE_EQ(dcm.layer.forward.total(), mcm.layer.forward.total());  // the same kernels
  EXPECT_GT(dcm.layer.backward.membound, mcm.layer.backward.membound);    // fp32 accumulation
  // ZeRO-1 all-reduces under DeepSpeed (Megatron's reduce-scatters: half the traffic), with bf16's
  // casts around it.
  EXPECT_GT(dcm.dp_reduction(1e9), dcm.dp_allreduce(1e9));
  EXPECT_GT(dcm.dp_reduction(1e9), 1.5 * dcm.dp_reduce_scatter(1e9));
  const SimResult d = simulate(ds, hw), m = simulate(mg, hw);
  EXPECT_GT(d.iter_time_s, 1.02 * m.iter_time_s);
  EXPECT_LT(d.iter_time_s, 1.25 * m.iter_time_s);
  // bf16: 2 + 2 + 4 bytes a parameter unsharded, 12 / d sharded; Megatron's distributed optimizer
  // with bf16 (fp32 main gradients) 6 + 12 / d (its dist_optimizer.md table).
  const MemoryVerdict dm = memory_verdict(ds, hw), mm = memory_verdict(mg, hw);
  EXPECT_NEAR(dm.stages[1].state / dm.stages[1].params, 8 + 12.0 / 8, 1e-9);
  EXPECT_NEAR(mm.stages[1].state / mm.stages[1].params, 6 + 12.0 / 8, 1e-9);
}

// The planner proposes only what the engine runs: 1F1B, and bf16 always sharded.
TEST(DeepSpeedStack, ThePlannerProposesOnlyWhatTheEngineRuns) {
  PlanRequest req;
  req.model = paper_run(24, 4096, 32, 1, 1, 1, 1, 64).model;
  req.gpus = 64;
  req.global_batch = 256;
  req.micro_batches = {1, 2};
  req.zero_modes = {0, 1};
  req.stack = StackKind::MegatronDeepspeed;
  req.precision = Precision::Bf16;
  req.top = 50;
  req.exhaustive = true;
  const PlanResult r = plan(req, selene());
  ASSERT_FALSE(r.best.empty());
  for (const PlanEntry& e : r.best) {
    EXPECT_EQ(e.cfg.par.schedule, ScheduleKind::OneFOneB);
    EXPECT_FALSE(e.cfg.par.sequence_parallel);
    EXPECT_EQ(stack_refusal(e.cfg), "");
  }
}

}  // namespace
}  // namespace ptdp::sim
