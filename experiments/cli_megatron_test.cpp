// Megatron-LM's example scripts through `ptdp train` as they are: the flags of
// examples/gpt3/train_gpt3_175b_distributed.sh (shrunk to a tiny model and world), the tokenizer
// that sizes the vocabulary, --data-path's list of words, the learning-rate styles, --save and
// --load naming one empty directory, and the refusals of what ptdp cannot honour.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/data/indexed_dataset_writer.h"
#include "core/data/tokenizer.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;
using Args = std::vector<std::string>;

std::string gpt2_file(const std::string& name) {
  return std::string(PTDP_SOURCE_DIR) + "/core/data/testdata/gpt2_bpe/" + name;
}

// PREFIX.bin/.idx of `docs` documents, tokenized by the GPT-2 BPE fixture vocabulary (as
// Megatron's preprocess_data.py writes one document per JSON line).
std::string gpt2_dataset(const TempDir& dir, const std::string& name, int docs) {
  TokenizerOptions o;
  o.type = "GPT2BPETokenizer";
  o.vocab_file = gpt2_file("vocab.json");
  o.merge_file = gpt2_file("merges.txt");
  const auto tok = make_tokenizer(o);
  IndexedDatasetWriter w(dir.file(name), TokenDType::U16);
  for (int i = 0; i < docs; ++i) {
    std::vector<int32_t> ids;
    tok->encode("Document " + std::to_string(i) + " says that the quick brown fox jumps over the lazy dog, again.", ids);
    w.add_document(ids);
  }
  w.finalize();
  return dir.file(name);
}

// The 34 flags of Megatron-LM's GPT-3 175B example (before its batch-size ramp became
// --step-batch-size-schedule), with the model, world, batch and iterations shrunk; the script's
// one ramp (--rampup-batch-size 16 16 5859375) is refused, saying why (below).
Args gpt3_script_flags(const TempDir& dir, const std::string& data, int iters) {
  const std::string ckpt = dir.file("ckpt"), tb = dir.file("tb");
  return {"train",
          // GPT_MODEL_ARGS
          "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--attention-backend", "auto",
          // TRAINING_ARGS
          "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", std::to_string(iters),
          "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--init-method-std", "0.006",
          "--clip-grad", "1.0", "--fp16", "--lr", "6.0e-5", "--lr-decay-style", "cosine", "--min-lr", "6.0e-6",
          "--lr-warmup-fraction", ".001", "--lr-decay-iters", "8",
          // MODEL_PARALLEL_ARGS
          "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
          // DATA_ARGS
          "--data-path", data, "--vocab-file", gpt2_file("vocab.json"), "--merge-file", gpt2_file("merges.txt"),
          "--split", "949,50,1",
          // EVAL_AND_LOGGING_ARGS
          "--log-interval", "2", "--save-interval", "2", "--eval-interval", "2", "--save", ckpt, "--load", ckpt,
          "--eval-iters", "1", "--tensorboard-dir", tb,
          // ptdp's own: which iterations are timed
          "--warmup", "1"};
}

TEST(CliMegatron, TheGpt3ExampleScriptsFlagsTrainAndResume) {
  TempDir dir;
  const std::string data = gpt2_dataset(dir, "corpus", 400);
  CliResult r = run_ptdp(dir, gpt3_script_flags(dir, data, 4), 300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // The vocabulary is the tokenizer's (the fixture's 1800 ids), the world t=2 x p=2, the data
  // Megatron's order of --data-path, and the empty --save/--load directory a fresh start.
  EXPECT_NE(r.out.find("V=1800"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("t=2 p=2 d=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data: Megatron-core's order"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no checkpoint in " + dir.file("ckpt") + " yet (--load is --save): starting from iteration 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("saved the checkpoint of iteration 4"), std::string::npos) << r.out;
  bool events = false;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("tb")))
    events = events || e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_TRUE(events);
  // The script run again with more iterations resumes from its own checkpoint.
  r = run_ptdp(dir, gpt3_script_flags(dir, data, 6), 300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("loaded the checkpoint of iteration 4"), std::string::npos) << r.out;
}

// What ptdp cannot honour is refused with the reason, before any work.
TEST(CliMegatron, FlagsPtdpCannotHonourAreRefusedSayingWhy) {
  TempDir dir;
  const Args tiny = {"train", "--model", "tiny", "--iters", "2"};
  auto with = [&](Args extra) {
    Args a = tiny;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_ptdp(dir, a);
  };
  CliResult r = with({"--rampup-batch-size", "16", "16", "5859375"});
  EXPECT_TRUE(IsUsageError(r, {"--rampup-batch-size 16 16 5859375", "every iteration at --global-batch-size"})) << r.err;
  r = with({"--step-batch-size-schedule", "0:16 2.4B:320 12B:1536"});  // the script's ramp since 2026
  EXPECT_TRUE(IsUsageError(r, {"--step-batch-size-schedule '0:16 2.4B:320 12B:1536'", "every iteration"})) << r.err;
  r = with({"--attention-backend", "fused"});  // Megatron-core's name for cuDNN's attention
  EXPECT_TRUE(IsUsageError(r, {"--attention-backend cudnn (Megatron-core's fused) needs --backend cuda"})) << r.err;
  // heads cuDNN does not take: refused before any GPU is touched, not run by ptdp's flash kernel
  r = with({"--backend", "cuda", "--precision", "f32", "--attention-backend", "cudnn"});
  EXPECT_TRUE(IsUsageError(r, {"--attention-backend cudnn: cuDNN's fused attention takes bf16 or f16 heads",
                               "(here f32, 16); use auto"}))
      << r.err;
  r = with({"--attention-backend", "sdpa"});
  EXPECT_TRUE(IsUsageError(r, {"--attention-backend 'sdpa' must be"})) << r.err;
  r = with({"--recompute-granularity", "full", "--recompute-method", "block"});
  EXPECT_TRUE(IsUsageError(r, {"--recompute-method block", "give uniform"})) << r.err;
  r = with({"--recompute-method", "uniform"});
  EXPECT_TRUE(IsUsageError(r, {"--recompute-method uniform needs --recompute-granularity full"})) << r.err;
  r = with({"--max-position-embeddings", "64"});
  EXPECT_TRUE(IsUsageError(r, {"--max-position-embeddings 64", "--seq-length 32"})) << r.err;
  r = with({"--max-position-embeddings", "16"});
  EXPECT_TRUE(IsUsageError(r, {"--max-position-embeddings 16 must be at least --seq-length 32"})) << r.err;
  r = with({"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"});
  EXPECT_TRUE(IsUsageError(r, {"--lr-warmup-fraction 0.1 and --lr-warmup-iters 2"})) << r.err;
  r = with({"--lr-decay-style", "WSD"});
  EXPECT_TRUE(IsUsageError(r, {"--lr-decay-style WSD needs --lr-wsd-decay-iters"})) << r.err;
  r = with({"--vocab-size", "300", "--vocab-file", gpt2_file("vocab.json"), "--merge-file", gpt2_file("merges.txt")});
  EXPECT_TRUE(IsUsageError(r, {"--vocab-size 300 differs from the tokenizer's vocabulary of 1800"})) << r.err;
  r = with({"--data-path", ""});
  EXPECT_TRUE(IsUsageError(r, {"--data-path"})) << r.err;
}

// The learning rate of each iteration (the loss log's lr column) under Megatron's decay styles:
// linear decays to --train-iters when --lr-decay-iters is not given, as Megatron's.
TEST(CliMegatron, LrDecayStyleAndWarmupFractionAreMegatrons) {
  TempDir dir;
  auto lrs = [&](Args extra) {
    Args a = {"train", "--model", "tiny", "--iters", "4", "--warmup", "1", "--lr", "1", "--min-lr", "0",
              "--loss-log", dir.file("l.csv")};  // iteration,loss,grad_norm,lr,...
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = run_ptdp(dir, a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream log(testing::text_of(dir.file("l.csv")));
    std::string row;
    std::getline(log, row);
    std::vector<double> v;
    while (std::getline(log, row)) {
      std::istringstream cells(row);
      std::string cell;
      for (int i = 0; i < 4; ++i) std::getline(cells, cell, ',');
      v.push_back(std::stod(cell));
    }
    return v;
  };
  EXPECT_EQ(lrs({"--lr-decay-style", "linear"}), (std::vector<double>{1.0, 0.75, 0.5, 0.25}));
  EXPECT_EQ(lrs({"--lr-decay-style", "constant", "--lr-warmup-iters", "2"}), (std::vector<double>{0.0, 0.5, 1.0, 1.0}));
  // A warm-up of 0.5 x 4 iterations, then linear to 0 at iteration 4.
  EXPECT_EQ(lrs({"--lr-decay-style", "linear", "--lr-warmup-fraction", "0.5"}),
            (std::vector<double>{0.0, 0.5, 1.0, 0.5}));
}

// --data-path as Megatron's separate words: weights and prefixes, a weighted blend.
TEST(CliMegatron, DataPathTakesMegatronsListAsSeparateWords) {
  TempDir dir;
  const std::string a = gpt2_dataset(dir, "a", 60), b = gpt2_dataset(dir, "b", 60);
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--vocab-size", "1800", "--iters", "2", "--data-path",
                                     "0.3", a, "0.7", b, "--split", "98,2,0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(a + ": weight 0.3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(b + ": weight 0.7"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ptdp
