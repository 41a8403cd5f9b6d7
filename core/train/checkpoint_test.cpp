// Checkpoints: bit-identical resume of a t=2 p=2 d=2 interleaved run, a save killed with
// SIGKILL leaves the previous checkpoint loadable, and bad checkpoints are refused clearly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/data/testing/data_test_util.h"
#include "core/parallel/topology.h"
#include "core/train/checkpoint.h"
#include "core/results/output_files.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"

namespace ptdp {
namespace {

constexpr uint64_t kId = 0x5a1e;  // the save id of the tests' saves

struct Grid {
  int t = 2, p = 2, d = 2, v = 2;
};

ModelConfig checkpoint_model8() {
  ModelConfig c = preset_config("tiny");
  c.layers = 8;
  return c;
}

// The run the tests' shards come from: model `c` on t x p ranks with v chunks a stage, the seed
// and the global batch; its checkpoint layout on a rank comes from checkpoint_layout.
RunConfig run_of(const ModelConfig& c, int t, int p, int v, uint64_t seed, int global_batch) {
  RunConfig r;
  r.model = c;
  r.par.tp = t, r.par.pp = p, r.par.vpp = v, r.par.dp = 1;
  if (v > 1) r.par.schedule = ScheduleKind::Interleaved;
  r.seed = seed;
  r.par.global_batch = global_batch;
  return r;
}

// Trains iterations (from, to] on t*p*d local ranks, loading from `load` first when from > 0 and
// saving at `to` into `save` when given; returns the loss of every iteration run.
std::vector<double> train(const Grid& r, int from, int to, const std::string& load, const std::string& save) {
  std::vector<double> losses;
  std::mutex mu;
  const Topology topo(r.t, r.p, r.d);
  const ModelConfig c = checkpoint_model8();
  run_local_ranks(topo.world(), [&](int rank, Communicator& world) {
    set_cpu_threads(1);
    ParallelGroups g = ParallelGroups::create(world, topo);
    auto be = make_cpu_backend();
    StageModel m = build_stage_model(c, r.t, g.me.tp, r.p, g.me.pp, r.v, *be, g.tp.get(), 7);
    SyntheticSamples data(c.vocab_size, c.seq_length, 7);
    TrainConfig tc;
    tc.micro_batch = 1;
    tc.global_batch = 8;
    tc.schedule = ScheduleKind::Interleaved;
    tc.optimizer.lr.max_lr = 1e-3;
    tc.optimizer.lr.warmup_iters = 2;
    tc.optimizer.lr.decay_iters = 6;
    Trainer trainer(m.pointers(), data, tc,
                    TrainerGroups{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get(), &world});
    const CheckpointLayout layout = checkpoint_layout(run_of(c, r.t, r.p, r.v, 7, 8), g.me.tp, g.me.pp, g.me.dp);
    if (from > 0) {
      ASSERT_EQ(read_latest(load), from);
      load_shard(load, from, layout, m.pointers(), trainer.optimizers(), kId);
      trainer.set_iteration(from);
    }
    std::vector<double> mine;
    for (int it = from + 1; it <= to; ++it) mine.push_back(trainer.step().loss);
    if (!save.empty()) {
      if (g.me.dp == 0) save_shard(save, layout, CheckpointState{to, 1.0, 0, 0, kId}, m.pointers(), trainer.optimizers());
      world.barrier();
      if (rank == 0) write_latest(save, to, kId);
      world.barrier();
    }
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) losses = mine;
  });
  return losses;
}

TEST(Checkpoint, ResumedRunGivesBitIdenticalLosses) {
  testing::TempDir dir;
  const Grid r;
  std::vector<double> straight = train(r, 0, 6, "", "");
  std::vector<double> first = train(r, 0, 3, "", dir.file("ckpt"));
  std::vector<double> second = train(r, 3, 6, dir.file("ckpt"), "");
  ASSERT_EQ(straight.size(), 6u);
  first.insert(first.end(), second.begin(), second.end());
  ASSERT_EQ(first.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(first[i], straight[i]) << "iteration " << i + 1;  // bit for bit
}

std::string usage_message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, AnotherLayoutOrADamagedShardIsRefusedClearly) {
  testing::TempDir dir;
  const std::string ck = dir.file("ckpt");
  train(Grid{1, 1, 1, 1}, 0, 1, "", ck);
  auto be = make_cpu_backend();
  ModelConfig c = checkpoint_model8();
  StageModel m = build_stage_model(c, 1, 0, 1, 0, 1, *be, nullptr, 7);
  SyntheticSamples data(c.vocab_size, c.seq_length, 7);
  TrainConfig tc;
  tc.global_batch = 8;
  Trainer trainer(m.pointers(), data, tc);
  const RunConfig run = run_of(c, 1, 1, 1, 7, 8);
  const CheckpointLayout layout = checkpoint_layout(run, 0, 0, 0);
  EXPECT_EQ(usage_message_of([&] { load_shard(ck, 1, layout, m.pointers(), trainer.optimizers(), kId); }), "");
  RunConfig batch = run;
  batch.par.global_batch = 16;
  CheckpointLayout other = checkpoint_layout(batch, 0, 0, 0);
  EXPECT_NE(usage_message_of([&] { load_shard(ck, 1, other, m.pointers(), trainer.optimizers(), kId); })
                .find("the checkpoint was saved with --tp 1 --pp 1 --vpp 1"),
            std::string::npos);
  RunConfig split = run;  // the same shard directory under context parallelism: refused by name
  split.par.cp = 2;
  other = checkpoint_layout(split, 0, 0, 0);
  const std::string cp_refusal =
      usage_message_of([&] { load_shard(ck, 1, other, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(cp_refusal.find("--context-parallel-size 1, this run has --context-parallel-size 2"), std::string::npos)
      << cp_refusal;
  RunConfig wide = run;
  wide.par.tp = 2;
  other = checkpoint_layout(wide, 1, 0, 0);  // its shard directory does not exist
  EXPECT_NE(usage_message_of([&] { load_shard(ck, 1, other, m.pointers(), trainer.optimizers(), kId); }).find("is missing"),
            std::string::npos);
  const std::string shard = shard_dir(ck, 1, 0, 0, 1) + "/model_optim_rng.bin";
  auto bytes = testing::read_file(shard);
  bytes[bytes.size() / 2] ^= 0x40;  // one flipped bit
  testing::write_file(shard, bytes);
  EXPECT_NE(usage_message_of([&] { load_shard(ck, 1, layout, m.pointers(), trainer.optimizers(), kId); }).find("checksum"),
            std::string::npos);
  bytes.resize(100);
  testing::write_file(shard, bytes);
  EXPECT_NE(usage_message_of([&] { load_shard(ck, 1, layout, m.pointers(), trainer.optimizers(), kId); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(usage_message_of([&] { read_latest(dir.file("nothing")); }).find("no checkpoint there"), std::string::npos);
  // A directory where a shard should be is named as such, not "truncated".
  std::filesystem::remove(shard);
  std::filesystem::create_directory(shard);
  EXPECT_NE(usage_message_of([&] { load_shard(ck, 1, layout, m.pointers(), trainer.optimizers(), kId); })
                .find("model_optim_rng.bin: is a directory, not a file"),
            std::string::npos);
}

// A llama checkpoint loaded as GPT (same l, h, a, s, V), or with another MLP size, is refused with
// both layouts named.
TEST(Checkpoint, LlamaCheckpointIsRefusedUnderGpt) {
  testing::TempDir dir;
  const std::string ck = dir.file("ckpt");
  const ModelConfig c = preset_config("llama-tiny");
  auto be = make_cpu_backend();
  StageModel m = build_stage_model(c, 1, 0, 1, 0, 1, *be, nullptr, 7);
  SyntheticSamples data(c.vocab_size, c.seq_length, 7);
  TrainConfig tc;
  tc.global_batch = 8;
  Trainer trainer(m.pointers(), data, tc);
  const RunConfig run = run_of(c, 1, 1, 1, 7, 8);
  const CheckpointLayout layout = checkpoint_layout(run, 0, 0, 0);
  save_shard(ck, layout, CheckpointState{0, 1.0, 0, 0, kId}, m.pointers(), trainer.optimizers());
  write_latest(ck, 0, kId);
  EXPECT_EQ(usage_message_of([&] { load_shard(ck, 0, layout, m.pointers(), trainer.optimizers(), kId); }), "");

  // The layout of the same run with one setting changed.
  auto changed = [&](const std::function<void(RunConfig&)>& change) {
    RunConfig r = run;
    change(r);
    return checkpoint_layout(r, 0, 0, 0);
  };
  const CheckpointLayout gpt = changed([](RunConfig& r) { r.model.arch = Arch::Gpt; });
  const std::string as_gpt = usage_message_of([&] { load_shard(ck, 0, gpt, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(as_gpt.find("the checkpoint was saved with --tp 1 --pp 1 --vpp 1 --zero 0, --arch llama l=4 h=64 a=4 "
                        "g=4 ffn=256 s=32 V=256"),
            std::string::npos)
      << as_gpt;
  EXPECT_NE(as_gpt.find("this run has --tp 1 --pp 1 --vpp 1 --zero 0, --arch gpt l=4 h=64 a=4 g=4 ffn=256 s=32 V=256"),
            std::string::npos)
      << as_gpt;

  const CheckpointLayout wider = changed([](RunConfig& r) { r.model.ffn_hidden_size = 512; });
  const std::string as_wider = usage_message_of([&] { load_shard(ck, 0, wider, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(as_wider.find("--arch llama l=4 h=64 a=4 g=4 ffn=256"), std::string::npos) << as_wider;
  EXPECT_NE(as_wider.find("this run has --tp 1 --pp 1 --vpp 1 --zero 0, --arch llama l=4 h=64 a=4 g=4 ffn=512"),
            std::string::npos)
      << as_wider;

  // The same sizes with grouped-query attention: another model (the QKV has fewer rows).
  const CheckpointLayout grouped = changed([](RunConfig& r) { r.model.query_groups = 2; });
  const std::string as_grouped =
      usage_message_of([&] { load_shard(ck, 0, grouped, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(as_grouped.find("was saved with --num-query-groups 4, this run has --num-query-groups 2"), std::string::npos)
      << as_grouped;
  EXPECT_NE(as_grouped.find("this run has --tp 1 --pp 1 --vpp 1 --zero 0, --arch llama l=4 h=64 a=4 g=2 ffn=256"),
            std::string::npos)
      << as_grouped;

  // Another epsilon or rotary base computes another function of the same weights.
  const CheckpointLayout eps = changed([](RunConfig& r) { r.model.layernorm_eps = 1e-6; });
  const std::string as_eps = usage_message_of([&] { load_shard(ck, 0, eps, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(as_eps.find("was saved with --norm-epsilon 1e-05, this run has --norm-epsilon 1e-06"), std::string::npos)
      << as_eps;
  const CheckpointLayout theta = changed([](RunConfig& r) { r.model.rope_theta = 500000; });
  const std::string as_theta =
      usage_message_of([&] { load_shard(ck, 0, theta, m.pointers(), trainer.optimizers(), kId); });
  EXPECT_NE(as_theta.find("was saved with --rotary-base 10000, this run has --rotary-base 500000"),
            std::string::npos)
      << as_theta;
}

TEST(Checkpoint, SigkillWhileSavingLeavesThePreviousCheckpointLoadable) {
  testing::TempDir dir;
  const std::string ck = dir.file("ckpt");
  ModelConfig c = preset_config("small");  // 40 MB a shard: each save takes a while
  auto be = make_cpu_backend();
  StageModel m = build_stage_model(c, 1, 0, 1, 0, 1, *be, nullptr, 3);
  SyntheticSamples data(c.vocab_size, c.seq_length, 3);
  TrainConfig tc;
  Trainer trainer(m.pointers(), data, tc);
  const CheckpointLayout layout = checkpoint_layout(run_of(c, 1, 1, 1, 3, 1), 0, 0, 0);
  save_shard(ck, layout, CheckpointState{1, 1.0, 0, 0, kId}, m.pointers(), trainer.optimizers());
  write_latest(ck, 1, kId);
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // saves iterations 2, 3, ... until killed
      for (int it = 2;; ++it) {
        save_shard(ck, layout, CheckpointState{it, 1.0, 0, 0, kId}, m.pointers(), trainer.optimizers());
        write_latest(ck, it, kId);
      }
    }
    usleep(30000 + 40000 * attempt);  // somewhere inside a save
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    const int64_t latest = read_latest(ck);
    CheckpointState st = load_shard(ck, latest, layout, m.pointers(), trainer.optimizers(), kId);
    EXPECT_EQ(st.iteration, latest);
  }
  // The next run that takes the directory removes the temporaries the kills left, also those of
  // iterations it never saves again.
  { DirLock lock(ck, "--save"); }
  for (const auto& e : std::filesystem::recursive_directory_iterator(ck))
    EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace ptdp
