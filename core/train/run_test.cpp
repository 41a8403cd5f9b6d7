// The training run's phases: one rank trains as a trainer built by hand, a stop request of one
// rank ends every rank after the same iteration (saving it), the events come in the run's order,
// a resumed run continues the losses, and the summary's medians.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/local/local_comm.h"
#include "core/data/testing/data_test_util.h"
#include "core/train/run.h"

namespace ptdp {
namespace {

// A directory for --save or --save-init (the command line's checks create it).
std::string made_dir(const testing::TempDir& dir, const std::string& name) {
  std::filesystem::create_directories(dir.file(name));
  return dir.file(name);
}

RunConfig tiny_run(int iters, int dp = 1) {
  RunConfig c;
  c.model = preset_config("tiny");
  c.par.dp = dp;
  c.par.micro_batch = 2;
  c.par.global_batch = 4;
  c.iters = iters;
  validate_run(c);
  return c;
}

// The phases of a run up to the evaluations after training.
void train_through(TrainingRun& run) {
  run.lock_checkpoint_dirs();
  run.set_up_data();
  run.build();
  run.restore_or_initialise();
  run.train();
  run.evaluate_after_training();
}

// The losses of every iteration of a run of c on thread ranks, each rank's as the run kept them.
std::vector<std::vector<double>> run_losses(const RunConfig& c, const std::function<int(int rank)>& stop = {}) {
  std::vector<std::vector<double>> losses(c.ranks);
  run_local_ranks(c.ranks, [&](int rank, Communicator& world) {
    auto be = make_cpu_backend();
    RunOptions o;
    o.keep_history = true;
    if (stop) o.stop_signal = [&, rank] { return stop(rank); };
    TrainingRun run(c, *be, world, world, o);
    train_through(run);
    for (const auto& [it, st] : run.history()) losses[rank].push_back(st.loss);
  });
  return losses;
}

TEST(TrainingRun, OneRankTrainsAsATrainerBuiltByHand) {
  const RunConfig c = tiny_run(3);
  auto be = make_cpu_backend();
  Gpt model(c.model, ShardSpec{}, *be, DType::F32);
  model.init(c.seed);
  SyntheticSamples data(c.model.vocab_size, c.model.seq_length, c.seed);
  TrainConfig tc;
  tc.micro_batch = 2;
  tc.global_batch = 4;
  Trainer trainer(model, data, tc);
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(trainer.step().loss);
  EXPECT_EQ(run_losses(c)[0], expected);  // bitwise
}

TEST(TrainingRun, AStopRequestOfOneRankEndsEveryRankAfterTheSameIterationAndSavesIt) {
  testing::TempDir dir;
  RunConfig c = tiny_run(10, 2);
  c.save_dir = made_dir(dir, "ck");
  int calls = 0;  // rank 1's iterations so far
  const auto losses = run_losses(c, [&](int rank) { return rank == 1 && ++calls >= 3 ? SIGTERM : 0; });
  EXPECT_EQ(losses[0].size(), 3u);
  EXPECT_EQ(losses[1].size(), 3u);
  EXPECT_EQ(testing::file_bytes(dir.file("ck/latest_checkpointed_iteration.txt")), "3\n");
}

// Records the events a run tells, in order.
struct EventList final : RunLog {
  std::vector<std::string> events;
  void split_ready(MegatronSplit, const MegatronSamples&, int64_t) override { events.push_back("split"); }
  void test_split_skipped(const std::string&) override { events.push_back("no test"); }
  void checkpoint_without_loss_scaler(double) override { events.push_back("no scaler"); }
  void loaded(int64_t it) override { events.push_back("loaded " + std::to_string(it)); }
  void no_checkpoint_to_load() override { events.push_back("no checkpoint"); }
  void saved(int64_t it) override { events.push_back("saved " + std::to_string(it)); }
  void saved_initial() override { events.push_back("saved initial"); }
  void started(const TrainingRun&) override { events.push_back("started"); }
  void iteration(const TrainingRun&, int it, const IterStats&, double) override {
    events.push_back("iteration " + std::to_string(it));
  }
  void evaluated(int it, bool after, double) override {
    events.push_back("evaluated " + std::to_string(it) + (after ? " after" : ""));
  }
  void tested(int it, double) override { events.push_back("tested " + std::to_string(it)); }
  void stopped(int signal, int it) override {
    events.push_back("stopped " + std::to_string(signal) + " " + std::to_string(it));
  }
  void loss_log_written(size_t n) override { events.push_back("loss log " + std::to_string(n)); }
};

// Runs c on one rank, telling `log`; returns the run's summary.
RunSummary run_one(const RunConfig& c, RunLog& log) {
  auto be = make_cpu_backend();
  const auto world = make_local_world(1);
  RunOptions o;
  o.log = &log;
  TrainingRun run(c, *be, *world[0], *world[0], o);
  train_through(run);
  run.write_loss_log();
  return run.summarise();
}

TEST(TrainingRun, TellsItsLogEachEventWhereTheRunReachesIt) {
  testing::TempDir dir;
  RunConfig c = tiny_run(4);
  c.eval_iters = 1;
  c.eval_interval = 2;
  c.save_dir = made_dir(dir, "ck");
  c.save_interval = 3;
  c.save_init_dir = made_dir(dir, "init");
  c.loss_log = dir.file("loss.csv");
  EventList log;
  const RunSummary s = run_one(c, log);
  const std::vector<std::string> expected = {
      "saved initial", "started", "iteration 1", "iteration 2", "evaluated 2", "iteration 3", "saved 3",
      "iteration 4",   "evaluated 4", "saved 4", "evaluated 4 after", "loss log 4"};
  EXPECT_EQ(log.events, expected);
  EXPECT_EQ(s.iterations, 4);
  EXPECT_EQ(s.timed, 3);  // after --warmup 1
  ASSERT_TRUE(s.valid_loss.has_value());
  EXPECT_GT(*s.valid_loss, 0);

}

TEST(TrainingRun, AResumedRunContinuesTheLossesOfTheWholeRun) {
  testing::TempDir dir;
  const std::vector<double> whole = run_losses(tiny_run(4))[0];
  RunConfig first = tiny_run(2);
  first.save_dir = made_dir(dir, "ck");
  run_losses(first);
  RunConfig rest = tiny_run(4);
  rest.load_dir = first.save_dir;
  EXPECT_EQ(run_losses(rest)[0], std::vector<double>(whole.begin() + 2, whole.end()));  // bitwise
}

TEST(RunSummary, MediansOverTheTimedIterationsAndTheLastOnesCounts) {
  std::vector<IterStats> timed(3);
  for (int i = 0; i < 3; ++i) {
    timed[i].time_ms = 10.0 * (3 - i);
    timed[i].fwd_ms = i;
    timed[i].p2p_bytes = 100 + i;
    timed[i].peak_activation_bytes = int64_t(2e9) * (i + 1);
  }
  timed[1].skipped = true;
  RunSummary s;
  summarise_timed(timed, {0.5, 0.1, 0.3}, s);
  EXPECT_EQ(s.timed, 3);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.iter_ms, 20);
  EXPECT_EQ(s.fwd_ms, 1);
  EXPECT_EQ(s.bubble, 0.3);
  EXPECT_EQ(s.p2p_bytes, 102);
  EXPECT_EQ(s.activation_gb, 6);
}

}  // namespace
}  // namespace ptdp
