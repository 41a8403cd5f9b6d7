// Checkpoints of the precision-aware optimizer: bf16 moments are saved as bf16 (2 bytes each), a
// resume repeats the run bit for bit, and a resume under other moment dtypes is refused naming the
// flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "core/backend/cpu/threads.h"
#include "core/data/testing/data_test_util.h"
#include "core/train/checkpoint.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"

namespace ptdp {
namespace {

constexpr uint64_t kBf16SaveId = 0xb16;

RunConfig bf16_state_run(const ModelConfig& c, DType moments) {
  RunConfig r;
  r.model = c;
  r.par.dp = 1;
  r.par.global_batch = 4;
  r.seed = 7;
  r.opt.precision_aware = moments != DType::F32;
  r.opt.exp_avg_dtype = r.opt.exp_avg_sq_dtype = moments;
  return r;
}

struct Bf16StateSession {
  StageModel model;
  std::unique_ptr<SyntheticSamples> data;
  std::unique_ptr<Trainer> trainer;
};

Bf16StateSession make_bf16_state_session(Backend& be, DType moments) {
  const ModelConfig c = preset_config("tiny");
  Bf16StateSession r{build_stage_model(c, 1, 0, 1, 0, 1, be, nullptr, 7), std::make_unique<SyntheticSamples>(c.vocab_size, c.seq_length, 7), nullptr};
  TrainConfig tc;
  tc.micro_batch = 2;
  tc.global_batch = 4;
  tc.optimizer = bf16_state_run(c, moments).opt;
  tc.optimizer.lr.max_lr = 1e-3;
  r.trainer = std::make_unique<Trainer>(r.model.pointers(), *r.data, tc);
  return r;
}

std::string bf16_resume_refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, Bf16MomentsAreSavedAsBf16AndResumeBitForBit) {
  set_cpu_threads(1);
  testing::TempDir dir;
  auto be = make_cpu_backend();
  const ModelConfig c = preset_config("tiny");
  std::vector<double> straight;
  {
    Bf16StateSession r = make_bf16_state_session(*be, DType::BF16);
    for (int i = 0; i < 4; ++i) straight.push_back(r.trainer->step().loss);
  }
  std::map<DType, int64_t> bytes;
  int64_t n = 0;
  for (DType moments : {DType::BF16, DType::F32}) {
    Bf16StateSession r = make_bf16_state_session(*be, moments);
    for (int i = 0; i < 2; ++i) r.trainer->step();
    const std::string ck = dir.file(std::string("ck_") + std::string(dtype_name(moments)));
    save_shard(ck, checkpoint_layout(bf16_state_run(c, moments), 0, 0, 0), CheckpointState{2, 1.0, 0, 0, kBf16SaveId},
               r.model.pointers(), r.trainer->optimizers());
    write_latest(ck, 2, kBf16SaveId);
    bytes[moments] = int64_t(std::filesystem::file_size(shard_dir(ck, 2, 0, 0, 1) + "/model_optim_rng.bin"));
    n = r.trainer->optimizers()[0]->state_numel();
  }
  // Two moments of n elements, 2 bytes each instead of 4 (the headers differ by the dtypes' names).
  EXPECT_NEAR(double(bytes[DType::F32] - bytes[DType::BF16]), double(4 * n), 64.0);

  Bf16StateSession resumed = make_bf16_state_session(*be, DType::BF16);
  load_shard(dir.file("ck_bf16"), 2, checkpoint_layout(bf16_state_run(c, DType::BF16), 0, 0, 0), resumed.model.pointers(),
             resumed.trainer->optimizers(), kBf16SaveId);
  resumed.trainer->set_iteration(2);
  for (int i = 2; i < 4; ++i) EXPECT_EQ(resumed.trainer->step().loss, straight[size_t(i)]) << "iteration " << i + 1;

  Bf16StateSession other = make_bf16_state_session(*be, DType::F32);
  const std::string why = bf16_resume_refusal([&] {
    load_shard(dir.file("ck_bf16"), 2, checkpoint_layout(bf16_state_run(c, DType::F32), 0, 0, 0), other.model.pointers(),
               other.trainer->optimizers(), kBf16SaveId);
  });
  EXPECT_NE(why.find("--exp-avg-dtype bf16, this run has --exp-avg-dtype f32"), std::string::npos) << why;
}

}  // namespace
}  // namespace ptdp
