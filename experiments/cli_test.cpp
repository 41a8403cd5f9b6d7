// End-to-end tests of the ptdp command line: bad flags, configs and dataset files give one
// "ptdp: error:" line naming the flag or file and the rule, exit code 2 and no CSV row;
// good runs append one well-formed row.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <set>
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "experiments/testing/cli_resume.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::read_file;
using testing::run_ptdp;
using testing::split_csv_line;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

// `ptdp train ARGS --csv DIR/out.csv`, with the CSV path returned for the "not created" check.
struct TrainRun {
  CliResult result;
  std::string csv;
};

TrainRun train(const TempDir& dir, Args args) {
  const std::string csv = dir.file("out.csv");
  args.insert(args.begin(), "train");
  args.push_back("--csv");
  args.push_back(csv);
  return {run_ptdp(dir, args), csv};
}

// Expects a usage error containing `needle`, and no CSV file.
void expect_refused(const Args& args, const std::string& needle) {
  TempDir dir;
  const TrainRun r = train(dir, args);
  EXPECT_TRUE(IsUsageError(r.result, {needle}));
  EXPECT_FALSE(fs::exists(r.csv)) << "a refused run created " << r.csv;
}

// ---- model flags ----

TEST(CliModelFlags, HeadsMustDivideHidden) {
  expect_refused({"--layers", "2", "--hidden", "64", "--heads", "5", "--seq-length", "8", "--vocab-size", "16"},
                 "--heads 5 must divide --hidden 64");
}

// Grouped-query attention, the MLP size and the norm epsilon (Megatron's flags).
TEST(CliModelFlags, QueryGroupsNeedGroupQueryAttentionAsInMegatron) {
  expect_refused({"--model", "tiny", "--num-query-groups", "2"},
                 "--num-query-groups 2 needs --group-query-attention");
}

TEST(CliModelFlags, QueryGroupsMustDivideHeadsAndBeDividedByTp) {
  expect_refused({"--model", "tiny", "--group-query-attention", "--num-query-groups", "3"},
                 "--num-query-groups 3 must divide --heads 4");
  expect_refused({"--model", "tiny", "--group-query-attention", "--num-query-groups", "8"},
                 "--num-query-groups 8 must be at most --heads 4");
  expect_refused({"--model", "tiny", "--group-query-attention", "--num-query-groups", "0"},
                 "--num-query-groups 0 must be positive");
  expect_refused({"--model", "llama-tiny-gqa", "--tp", "4"}, "--tp 4 must divide --num-query-groups 2");
  // --group-query-attention alone: Megatron's default of one group (multi-query attention).
  expect_refused({"--model", "tiny", "--group-query-attention", "--tp", "2"}, "--tp 2 must divide --num-query-groups 1");
}

TEST(CliModelFlags, FfnHiddenSizeAndNormEpsilonAreChecked) {
  expect_refused({"--model", "tiny", "--ffn-hidden-size", "0"}, "--ffn-hidden-size 0 must be positive");
  expect_refused({"--model", "tiny", "--ffn-hidden-size", "99", "--tp", "2"},
                 "--tp 2 must divide the MLP's hidden size 99");
  expect_refused({"--model", "tiny", "--norm-epsilon", "0"}, "--norm-epsilon 0 must be positive");
}

TEST(CliModelFlags, GqaModelsTrainUnderTensorParallelism) {
  TempDir dir;
  const TrainRun r = train(dir, {"--model", "llama-tiny-gqa", "--tp", "2", "--iters", "2", "--warmup", "1"});
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  const TrainRun g = train(dir, {"--model", "tiny", "--group-query-attention", "--num-query-groups", "2",
                                 "--ffn-hidden-size", "96", "--norm-epsilon", "1e-6", "--tp", "2", "--iters", "2",
                                 "--warmup", "1"});
  ASSERT_EQ(g.result.exit_code, 0) << g.result.err;
  EXPECT_NE(testing::text_of(g.csv).find("tiny-custom"), std::string::npos);
}

struct SizeCase {
  const char* flag;
  const char* value;
};

void PrintTo(const SizeCase& c, std::ostream* os) { *os << c.flag << " " << c.value; }

class NonPositiveSize : public ::testing::TestWithParam<SizeCase> {};

TEST_P(NonPositiveSize, IsRefused) {
  const SizeCase c = GetParam();
  expect_refused({"--model", "tiny", c.flag, c.value}, std::string(c.flag) + " " + c.value + " must be positive");
}

INSTANTIATE_TEST_SUITE_P(Cli, NonPositiveSize,
                         ::testing::Values(SizeCase{"--layers", "0"}, SizeCase{"--hidden", "-4"},
                                           SizeCase{"--seq-length", "0"}, SizeCase{"--vocab-size", "0"},
                                           SizeCase{"--micro-batch", "0"}, SizeCase{"--iters", "0"},
                                           SizeCase{"--tp", "0"}),
                         [](const ::testing::TestParamInfo<SizeCase>& info) {
                           std::string name;
                           for (const char* p = info.param.flag + 2; *p; ++p) name += *p == '-' ? '_' : *p;
                           const std::string v = info.param.value;
                           return name + "_" + (v[0] == '-' ? "minus" + v.substr(1) : v);
                         });

TEST(CliModelFlags, SizesAboveTheirBoundsAreRefused) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--layers", "65537"}, "--layers 65537 must be at most 65536"},
      {{"--hidden", "1000000000", "--heads", "1"}, "--hidden 1000000000 must be at most 1048576"},
      {{"--heads", "65537"}, "--heads 65537 must be at most 65536"},
      {{"--seq-length", "1048577"}, "--seq-length 1048577 must be at most 1048576"},
      {{"--make-vocab-size-divisible-by", "65537"}, "--make-vocab-size-divisible-by 65537 must be at most 65536"},
  };
  for (const auto& [flags, needle] : cases) {
    Args args = {"--model", "tiny"};
    args.insert(args.end(), flags.begin(), flags.end());
    expect_refused(args, needle);
  }
}

TEST(CliModelFlags, TheLargestSizesAreRefusedByTheMemoryEstimateWithoutOverflow) {
  expect_refused({"--model", "tiny", "--layers", "65536", "--hidden", "1048576", "--heads", "65536", "--seq-length",
                  "1048576"},
                 "--model tiny-custom (l=65536 h=1048576 s=1048576) with --micro-batch 1 needs about ");
  expect_refused({"--model", "tiny", "--hidden", "1048576", "--heads", "1"},
                 "GB for one model replica in f32, more than the 4398 GB one replica may use");
}

TEST(CliModelFlags, UnknownPresetIsRefused) {
  expect_refused({"--model", "nope"}, "--model 'nope' is not a preset");
}

TEST(CliModelFlags, SizesAreRequiredWithoutModel) {
  expect_refused({"--hidden", "64", "--heads", "4", "--seq-length", "8", "--vocab-size", "16"},
                 "--layers is required without --model");
}

// ---- parallel flags ----

TEST(CliParallelFlags, TpMustDivideHeads) {
  expect_refused({"--model", "tiny", "--tp", "3"}, "--tp 3 must divide --heads 4");
}

TEST(CliParallelFlags, PpMustDivideLayers) {
  expect_refused({"--model", "tiny", "--pp", "3"}, "--pp 3 must divide --layers 4");
}

TEST(CliParallelFlags, PpTimesVppMustDivideLayers) {
  expect_refused({"--model", "tiny", "--pp", "2", "--vpp", "4", "--schedule", "interleaved"},
                 "--pp 2 x --vpp 4 must divide --layers 4");
}

TEST(CliParallelFlags, InterleavingNeedsMicroBatchesAMultipleOfPp) {
  expect_refused({"--model", "tiny", "--pp", "2", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "3"},
                 "needs the number of micro-batches (3) to be a multiple of --pp 2");
}

TEST(CliParallelFlags, VppAboveOneNeedsAPipeline) {
  expect_refused({"--model", "tiny", "--vpp", "2", "--schedule", "interleaved"}, "--vpp 2 needs a pipeline");
}

TEST(CliParallelFlags, VppAboveOneNeedsTheInterleavedSchedule) {
  expect_refused({"--model", "tiny", "--pp", "2", "--vpp", "2"}, "--vpp 2 needs --schedule interleaved");
}

TEST(CliParallelFlags, MicroBatchMustDivideThePerRankBatch) {
  expect_refused({"--model", "tiny", "--dp", "2", "--micro-batch", "3", "--global-batch", "8"},
                 "--global-batch 8 must be a multiple of --micro-batch 3 x --dp 2 = 6");
}

TEST(CliParallelFlags, RanksMustEqualTheLayout) {
  expect_refused({"--model", "tiny", "--tp", "2", "--dp", "2", "--ranks", "3"}, "--ranks 3");
}

TEST(CliParallelFlags, NcclNeedsTheCudaBackend) {
  expect_refused({"--model", "tiny", "--comm", "nccl"}, "--comm nccl needs --backend cuda");
}

TEST(CliParallelFlags, GlobalBatchMustBeAMultipleOfMicroBatch) {
  expect_refused({"--model", "tiny", "--global-batch", "6", "--micro-batch", "4"},
                 "--global-batch 6 must be a multiple of --micro-batch 4");
}

TEST(CliParallelFlags, UnknownScheduleIsRefused) {
  expect_refused({"--model", "tiny", "--schedule", "foo"}, "--schedule 'foo' must be gpipe, 1f1b or interleaved");
}

TEST(CliParallelFlags, UnknownRecomputeIsRefused) {
  expect_refused({"--model", "tiny", "--recompute", "maybe"}, "--recompute 'maybe' must be none, full or selective");
}

TEST(CliParallelFlags, RecomputeActivationIsRefusedUnderFullRecomputation) {
  expect_refused({"--model", "tiny", "--recompute", "full", "--recompute-activation"},
                 "--recompute-activation needs --recompute none or selective: --recompute full already recomputes "
                 "the whole layer");
}

TEST(CliParallelFlags, SequenceParallelNeedsTensorParallelism) {
  expect_refused({"--model", "tiny", "--sequence-parallel"}, "--sequence-parallel needs --tp > 1");
}

TEST(CliParallelFlags, SequenceParallelNeedsTpToDivideTheRowsOfAMicroBatch) {
  expect_refused({"--model", "tiny", "--tp", "4", "--seq-length", "6", "--sequence-parallel"},
                 "--sequence-parallel needs --tp 4 to divide --micro-batch 1 x --seq-length 6 = 6");
}

TEST(CliParallelFlags, ContextParallelismNeedsTwoCChunksOfTheSequence) {
  expect_refused({"--model", "tiny", "--context-parallel-size", "4", "--seq-length", "12"},
                 "--context-parallel-size 4 needs --seq-length 12 to be a multiple of 2 x 4");
}

TEST(CliParallelFlags, ContextParallelismNeedsBlockAttention) {
  expect_refused({"--model", "tiny", "--context-parallel-size", "2", "--attention-backend", "unfused"},
                 "--context-parallel-size 2 needs block attention: --attention-backend unfused");
}

TEST(CliParallelFlags, AllToAllContextParallelismNeedsCToDivideTheHeads) {
  // tiny: 4 heads; --tp 2 leaves 2 per rank, which c = 4 cannot split.
  expect_refused({"--model", "tiny", "--tp", "2", "--context-parallel-size", "4", "--cp-comm-type", "a2a"},
                 "--cp-comm-type a2a needs --context-parallel-size 4 to divide the heads of each tensor-parallel "
                 "rank (2: it exchanges heads for sequence)");
}

TEST(CliParallelFlags, ContextParallelSequenceParallelNeedsTpToDivideTheRowsOfARank) {
  expect_refused({"--model", "tiny", "--tp", "4", "--context-parallel-size", "4", "--seq-length", "24",
                  "--sequence-parallel"},
                 "--sequence-parallel with --context-parallel-size 4 needs --tp 4 to divide --micro-batch 1 x "
                 "--seq-length 24 / 4 = 6");
}

TEST(CliParallelFlags, RanksMustBeAMultipleOfTheModelAndContextParallelRanks) {
  expect_refused({"--model", "tiny", "--context-parallel-size", "2", "--ranks", "3"},
                 "--ranks 3 must be a multiple of --tp 1 x --pp 1 x --context-parallel-size 2");
}

// ---- run flags ----

TEST(CliRunFlags, CudaWithoutAGpuIsRefusedNamingTheReason) {
#ifdef PTDP_HAVE_CUDA
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  expect_refused({"--model", "tiny", "--backend", "cuda"}, "--backend cuda: no GPU here (");
#else
  expect_refused({"--model", "tiny", "--backend", "cuda"}, "--backend cuda: this build has no CUDA backend");
#endif
}

TEST(CliRunFlags, LossScaleFlagsAreChecked) {
  expect_refused({"--model", "tiny", "--loss-scale", "128"}, "--loss-scale 128 applies to --precision f16 only (not f32)");
  expect_refused({"--model", "tiny", "--precision", "f16", "--loss-scale", "-1"},
                 "--loss-scale -1 must be 0 (dynamic) or a positive finite scale");
  expect_refused({"--model", "tiny", "--precision", "f16", "--min-loss-scale", "0"},
                 "--min-loss-scale 0 must be positive and at most --initial-loss-scale");
  expect_refused({"--model", "tiny", "--precision", "f16", "--hysteresis", "0"}, "--hysteresis 0 must be at least 1");
}

TEST(CliRunFlags, UnknownPrecisionIsRefused) {
  expect_refused({"--model", "tiny", "--precision", "f8"}, "--precision 'f8' must be f32, bf16 or f16");
}

TEST(CliRunFlags, UnknownBackendIsRefused) {
  expect_refused({"--model", "tiny", "--backend", "tpu"}, "--backend 'tpu' must be cpu or cuda");
}

TEST(CliRunFlags, UnknownCommIsRefused) {
  expect_refused({"--model", "tiny", "--comm", "xyz"}, "--comm 'xyz' must be local, mpi or nccl");
}

TEST(CliRunFlags, WarmupMustBeLessThanIters) {
  expect_refused({"--model", "tiny", "--warmup", "5", "--iters", "5"}, "--warmup 5 must be less than --iters 5");
}

TEST(CliRunFlags, NegativeLearningRateIsRefused) {
  expect_refused({"--model", "tiny", "--lr", "-1"}, "--lr -1 must be positive");
}

TEST(CliRunFlags, AdamBeta1MustBeBelowOne) {
  expect_refused({"--model", "tiny", "--adam-beta1", "1.5"}, "--adam-beta1 1.5 must be in [0, 1)");
}

TEST(CliRunFlags, LoadFromADirectoryWithoutCheckpointIsRefused) {
  TempDir dir;
  expect_refused({"--model", "tiny", "--load", dir.file("none")}, "no checkpoint there");
}

TEST(CliRunFlags, SaveIntervalNeedsSave) {
  expect_refused({"--model", "tiny", "--save-interval", "2"}, "--save-interval 2 needs --save DIR");
}

TEST(CliRunFlags, LoadUnderAnotherLayoutIsRefused) {
  TempDir dir;
  const std::string ck = dir.file("ck");
  const CliResult saved = run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--warmup", "0", "--save", ck});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  expect_refused({"--model", "tiny", "--tp", "2", "--iters", "4", "--load", ck}, "this run has --tp 2");
  expect_refused({"--model", "tiny", "--global-batch", "2", "--iters", "4", "--load", ck},
                 "the checkpoint was saved with --tp 1 --pp 1 --vpp 1");
}

TEST(CliRunFlags, NonFiniteLearningRateIsRefused) {
  expect_refused({"--model", "tiny", "--lr", "inf"}, "--lr inf must be a finite number");
}

TEST(CliRunFlags, SeedMustBeAWholeNumberInUint64Range) {
  for (const char* seed : {"-1", "abc", "1.5", "18446744073709551616", ""})
    expect_refused({"--model", "tiny", "--seed", seed},
                   "--seed " + std::string(seed) + " must be a whole number from 0 to 18446744073709551615");
  TempDir dir;
  const TrainRun r = train(dir, {"--model", "tiny", "--iters", "1", "--warmup", "0", "--seed", "18446744073709551615"});
  EXPECT_EQ(r.result.exit_code, 0) << r.result.err;
}

TEST(CliRunFlags, CommTimeoutMustBeFinitePositiveAndAtMostAMillionSeconds) {
  expect_refused({"--model", "tiny", "--tp", "2", "--comm-timeout", "1e10"},
                 "--comm-timeout 10000000000 must be at most 1000000 seconds");
  expect_refused({"--model", "tiny", "--tp", "2", "--comm-timeout", "1e300"},
                 "--comm-timeout 1e+300 must be at most 1000000 seconds");
  expect_refused({"--model", "tiny", "--comm-timeout", "inf"}, "--comm-timeout inf must be a finite number of seconds");
  expect_refused({"--model", "tiny", "--comm-timeout", "nan"}, "--comm-timeout nan must be a finite number of seconds");
  expect_refused({"--model", "tiny", "--comm-timeout", "-5"}, "--comm-timeout -5 must be a positive number of seconds");
}

TEST(CliRunFlags, ModelTooBigForThisMachineIsRefusedAtOnce) {
  // 52 billion parameters: 830 GB of state, within the sizes' bounds and the estimate's limit.
  expect_refused({"--model", "tiny", "--layers", "65536", "--hidden", "256"}, "GB of memory here");
}

// ---- parse errors (CLI11) ----

TEST(CliParse, UnknownFlagIsRefused) { expect_refused({"--model", "tiny", "--foo"}, "--foo"); }

TEST(CliParse, NonNumericValueIsRefused) { expect_refused({"--model", "tiny", "--layers", "abc"}, "--layers"); }

TEST(CliParse, SimulateWithATpTimesPpBeyondIntIsRefusedNotDividedByZero) {
  TempDir dir;
  const Args args = {"simulate", "--model", "tiny", "--tp", "65536", "--pp", "65536", "--gpus", "1", "--hardware", "cpu"};
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {"--gpus 1 must be a multiple of --tp 65536 x --pp 65536"}));
}

TEST(CliParse, UnknownCommandIsNamedWithTheKnownOnes) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"frobnicate", "--model", "tiny"}),
                           {"ptdp: error: unknown command 'frobnicate' (commands: train, preprocess, simulate, plan, "
                            "accept, compare, reproduce, fields, export-hf)"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"tra\nin"}), {"unknown command 'tra\\nin'"}));
}

// The bubble a run prints is the paper's t_pb/t_id (idle over compute: (p-1)/m ideally, above 1
// where m < p - 1), named so, with the share of the schedule idle beside it, which is a fraction.
TEST(CliTrain, TheBubbleIsNamedTpbOverTidWithItsIdleShareOfTheSchedule) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--pp", "2", "--micro-batch", "1", "--global-batch",
                                     "2", "--iters", "2", "--warmup", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("done: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string key = "bubble t_pb/t_id ";
  const size_t b = r.out.find(key, at);
  ASSERT_NE(b, std::string::npos) << r.out;
  size_t used = 0;
  const double ratio = std::stod(r.out.substr(b + key.size()), &used);
  const std::string rest = r.out.substr(b + key.size() + used);
  ASSERT_EQ(rest.rfind(" (", 0), 0u) << rest;
  const double idle = std::stod(rest.substr(2));
  EXPECT_NE(rest.find("% of the schedule idle)"), std::string::npos) << rest;
  EXPECT_GE(ratio, 0);
  EXPECT_GE(idle, 0);
  EXPECT_LE(idle, 100);
  EXPECT_NEAR(idle, 100 * ratio / (1 + ratio), 0.6);
}

// Bare `ptdp` prints the help (on stderr: it is still a usage error, exit 2), then one error line.
TEST(CliParse, NoCommandPrintsTheHelpAndExitsTwo) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  for (const char* n : {"Usage:", "Subcommands:", "train", "reproduce", "--version"})
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_EQ(last, "ptdp: error: no command given: name one of train, preprocess, simulate, plan, accept, compare, "
                  "reproduce, fields, export-hf (`ptdp COMMAND --help` lists its flags)\n");
}

TEST(CliParse, HelpExitsZero) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("train"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("preprocess"), std::string::npos) << r.out;
}

// ---- dataset files ----

// A good byte-level dataset made by `ptdp preprocess`, and damaged copies of it.
class CliDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 8; ++i) text += "The quick brown fox jumps over the lazy dog. ";
    const std::string input = dir_.file("in.txt");
    write_file(input, std::vector<uint8_t>(text.begin(), text.end()));
    good_ = dir_.file("good");
    const CliResult r = run_ptdp(dir_, {"preprocess", "--input", input, "--output-prefix", good_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    idx_ = read_file(good_ + ".idx");
    bin_ = read_file(good_ + ".bin");
    ASSERT_EQ(idx_.size(), 34u + 12 + 16);  // header, one sequence, two document indices
    ASSERT_EQ(bin_.size(), 2 * text.size());  // uint16 tokens
  }

  // Writes NAME.idx and NAME.bin (either left out when null); returns the prefix.
  std::string copy(const std::string& name, const std::vector<uint8_t>* idx, const std::vector<uint8_t>* bin) {
    const std::string prefix = dir_.file(name);
    if (idx != nullptr) write_file(prefix + ".idx", *idx);
    if (bin != nullptr) write_file(prefix + ".bin", *bin);
    return prefix;
  }
  std::string with_idx(const std::string& name, const std::vector<uint8_t>& idx) { return copy(name, &idx, &bin_); }

  // `ptdp train --model tiny --iters 2 --warmup 0 --data PREFIX [extra] --csv OUT`
  TrainRun train_on(const std::string& prefix, Args extra = {}) {
    Args args = {"--model", "tiny", "--iters", "2", "--warmup", "0", "--data", prefix};
    args.insert(args.end(), extra.begin(), extra.end());
    return train(dir_, args);
  }

  void expect_refused_on(const std::string& prefix, const std::vector<std::string>& needles) {
    const TrainRun r = train_on(prefix);
    EXPECT_TRUE(IsUsageError(r.result, needles));
    EXPECT_FALSE(fs::exists(r.csv)) << "a refused run created " << r.csv;
  }

  TempDir dir_;
  std::string good_;
  std::vector<uint8_t> idx_, bin_;
};

TEST_F(CliDataset, GoodDatasetTrains) {
  const TrainRun r = train_on(good_);
  EXPECT_EQ(r.result.exit_code, 0) << r.result.err;
  EXPECT_EQ(lines_of(testing::text_of(r.csv)).size(), 2u);
}

TEST_F(CliDataset, WrongMagicNamesTheIndex) {
  auto idx = idx_;
  idx[0] = 'X';
  const std::string p = with_idx("magic", idx);
  expect_refused_on(p, {p + ".idx: ", "bad magic"});
}

TEST_F(CliDataset, UnsupportedVersionNamesTheIndex) {
  auto idx = idx_;
  idx[9] = 2;
  const std::string p = with_idx("version", idx);
  expect_refused_on(p, {p + ".idx: ", "version 2 is not supported"});
}

TEST_F(CliDataset, FloatDtypeNamesTheIndex) {
  auto idx = idx_;
  idx[17] = 6;  // float64
  const std::string p = with_idx("float64", idx);
  expect_refused_on(p, {p + ".idx: ", "dtype code 6", "is not an integer token type"});
}

TEST_F(CliDataset, UnknownDtypeNamesTheIndex) {
  auto idx = idx_;
  idx[17] = 9;
  const std::string p = with_idx("dtype9", idx);
  expect_refused_on(p, {p + ".idx: ", "unknown dtype code 9"});
}

TEST_F(CliDataset, IndexCutInTheHeaderIsTruncated) {
  const std::vector<uint8_t> idx(idx_.begin(), idx_.begin() + 20);
  const std::string p = with_idx("cut20", idx);
  expect_refused_on(p, {p + ".idx: ", "truncated"});
}

TEST_F(CliDataset, IndexCutAfterTheHeaderIsTruncated) {
  const std::vector<uint8_t> idx(idx_.begin(), idx_.begin() + 40);
  const std::string p = with_idx("cut40", idx);
  expect_refused_on(p, {p + ".idx: ", "truncated"});
}

TEST_F(CliDataset, TruncatedBinNamesTheBin) {
  const std::vector<uint8_t> bin(bin_.begin(), bin_.end() - 2);
  const std::string p = copy("shortbin", &idx_, &bin);
  expect_refused_on(p, {p + ".bin: ", "truncated"});
}

TEST_F(CliDataset, MissingIndexNamesTheIndex) {
  const std::string p = copy("noidx", nullptr, &bin_);
  expect_refused_on(p, {p + ".idx: ", "cannot open"});
}

TEST_F(CliDataset, MissingBinNamesTheBin) {
  const std::string p = copy("nobin", &idx_, nullptr);
  expect_refused_on(p, {p + ".bin: ", "cannot open"});
}

TEST_F(CliDataset, DatasetShorterThanOneSampleIsRefused) {
  const TrainRun r = train_on(good_, {"--seq-length", "1000"});
  EXPECT_TRUE(IsUsageError(r.result, {good_ + ".bin: ", "needs at least s+1 = 1001 for --seq-length 1000"}));
  EXPECT_FALSE(fs::exists(r.csv));
}

TEST_F(CliDataset, TokensOutsideTheVocabularyAreRefused) {
  const TrainRun r = train_on(good_, {"--vocab-size", "100"});
  EXPECT_TRUE(IsUsageError(r.result, {good_ + ".bin: ", "is outside the vocabulary (--vocab-size 100)"}));
  EXPECT_FALSE(fs::exists(r.csv));
}

TEST_F(CliDataset, TokensOutsideAnExplicitVocabularyAreRefused) {
  const TrainRun r = train(dir_, {"--layers", "2", "--hidden", "32", "--heads", "2", "--seq-length", "16",
                                  "--vocab-size", "100", "--iters", "2", "--warmup", "0", "--data", good_});
  EXPECT_TRUE(IsUsageError(r.result, {good_ + ".bin: ", "is outside the vocabulary (--vocab-size 100)"}));
  EXPECT_FALSE(fs::exists(r.csv));
}

// ---- preprocess ----

TEST(CliPreprocess, MissingInputNamesTheFlag) {
  TempDir dir;
  const std::string prefix = dir.file("out");
  const CliResult r = run_ptdp(dir, {"preprocess", "--input", dir.file("none.txt"), "--output-prefix", prefix});
  EXPECT_TRUE(IsUsageError(r, {"--input ", "none.txt", "cannot open"}));
  EXPECT_FALSE(fs::exists(prefix + ".bin"));
  EXPECT_FALSE(fs::exists(prefix + ".idx"));
}

TEST(CliPreprocess, OutputPrefixInAMissingDirectoryNamesTheFlag) {
  TempDir dir;
  const std::string input = dir.file("in.txt");
  write_file(input, {'h', 'e', 'l', 'l', 'o'});
  const CliResult r =
      run_ptdp(dir, {"preprocess", "--input", input, "--output-prefix", dir.file("missing/out")});
  EXPECT_TRUE(IsUsageError(r, {"--output-prefix ", "does not exist"}));
  EXPECT_FALSE(fs::exists(dir.file("missing")));
}

// ---- result CSV ----

const char* const kHeaderStart = "experiment,mode,backend,comm,precision,model,params,";

Args good_train_args() {
  return {"--model", "tiny", "--iters", "3", "--warmup", "1", "--micro-batch", "2", "--global-batch", "4"};
}

TEST(CliCsv, ForeignHeaderIsRefusedAndLeftUnchanged) {
  TempDir dir;
  const std::string csv = dir.file("out.csv");
  const std::vector<uint8_t> before = {'a', ',', 'b', '\n', '1', ',', '2', '\n'};
  write_file(csv, before);
  const TrainRun r = train(dir, {"--model", "tiny", "--iters", "2", "--warmup", "1"});
  EXPECT_TRUE(IsUsageError(r.result, {csv + ": ", "header"}));
  EXPECT_EQ(read_file(csv), before);
}

// Disabled: today this trains first and then fails with exit code 1 ("ptdp: failed: ... cannot
// create a temporary file"); enable once --csv is checked before training.
TEST(CliCsv, CsvInAMissingDirectoryIsRefusedBeforeTraining) {
  TempDir dir;
  const std::string csv = dir.file("missing/out.csv");
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--warmup", "1", "--csv", csv});
  EXPECT_TRUE(IsUsageError(r, {"--csv ", "missing"}));
  EXPECT_EQ(r.out.find("iteration"), std::string::npos) << "it trained before refusing:\n" << r.out;
  EXPECT_FALSE(fs::exists(dir.file("missing")));
}

TEST(CliCsv, RefusedFlagsLeaveAnExistingCsvUnchanged) {
  TempDir dir;
  const TrainRun first = train(dir, good_train_args());
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  const std::vector<uint8_t> before = read_file(first.csv);
  const TrainRun r = train(dir, {"--model", "tiny", "--heads", "5"});
  EXPECT_TRUE(IsUsageError(r.result, {"--heads 5 must divide --hidden 64"}));
  EXPECT_EQ(read_file(first.csv), before);
}

TEST(CliCsv, TrainWritesHeaderAndAppendsOneRowPerRun) {
  TempDir dir;
  const TrainRun first = train(dir, good_train_args());
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  std::vector<std::string> lines = lines_of(testing::text_of(first.csv));
  ASSERT_EQ(lines.size(), 2u);
  const std::string header = lines[0];
  EXPECT_EQ(header.rfind(kHeaderStart, 0), 0u) << header;
  const std::vector<std::string> cols = split_csv_line(header);
  EXPECT_NE(std::find(cols.begin(), cols.end(), "timestamp"), cols.end()) << header;

  const TrainRun second = train(dir, good_train_args());
  ASSERT_EQ(second.result.exit_code, 0) << second.result.err;
  lines = lines_of(testing::text_of(first.csv));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], header);
  for (size_t i = 1; i < lines.size(); ++i)
    EXPECT_EQ(split_csv_line(lines[i]).size(), cols.size()) << "row " << i << ": " << lines[i];
}

TEST(CliCsv, LossOfAnUntrainedTinyModelIsNearLog256) {
  TempDir dir;
  const TrainRun r = train(dir, good_train_args());
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  const std::vector<std::string> lines = lines_of(testing::text_of(r.csv));
  ASSERT_EQ(lines.size(), 2u);
  const std::vector<std::string> cols = split_csv_line(lines[0]);
  const std::vector<std::string> row = split_csv_line(lines[1]);
  ASSERT_EQ(row.size(), cols.size());
  const auto at = std::find(cols.begin(), cols.end(), "loss");
  ASSERT_NE(at, cols.end()) << lines[0];
  const std::string& field = row[static_cast<size_t>(at - cols.begin())];
  size_t used = 0;
  double loss = NAN;
  ASSERT_NO_THROW(loss = std::stod(field, &used)) << "loss field '" << field << "'";
  EXPECT_EQ(used, field.size()) << "loss field '" << field << "'";
  EXPECT_NEAR(loss, std::log(256.0), 0.3);
}


// ---- --loss-log and --save-init (scripts/compare_pytorch.py reads both) ----

TEST(CliLossLog, WritesEveryIterationAndTheLastLossMatchesTheRow) {
  TempDir dir;
  Args args = good_train_args();
  args.insert(args.end(), {"--loss-log", dir.file("loss.csv")});
  const TrainRun r = train(dir, args);
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  const std::vector<std::string> log = lines_of(testing::text_of(dir.file("loss.csv")));
  ASSERT_EQ(log.size(), 4u);  // header + 3 iterations
  EXPECT_EQ(log[0], "iteration,loss,grad_norm,lr,loss_scale,skipped");
  for (size_t i = 1; i < log.size(); ++i) {
    const std::vector<std::string> f = split_csv_line(log[i]);
    ASSERT_EQ(f.size(), 6u) << log[i];
    EXPECT_EQ(f[0], std::to_string(i));
    EXPECT_TRUE(std::isfinite(std::stod(f[1]))) << log[i];
    EXPECT_GT(std::stod(f[2]), 0.0) << log[i];
  }
  const std::vector<std::string> rows = lines_of(testing::text_of(r.csv));
  ASSERT_EQ(rows.size(), 2u);
  const std::vector<std::string> cols = split_csv_line(rows[0]), row = split_csv_line(rows[1]);
  const size_t at = static_cast<size_t>(std::find(cols.begin(), cols.end(), "loss") - cols.begin());
  ASSERT_LT(at, row.size());
  EXPECT_NEAR(std::stod(split_csv_line(log.back())[1]), std::stod(row[at]), 1e-5);
}

// `ptdp train --tp 2 --sequence-parallel` (and with --pp 2) gives the losses of the run without
// it, and records sequence_parallel = 1 in its row.
TEST(CliSequenceParallel, LossesEqualThoseWithoutIt) {
  auto run = [](Args extra, bool sp) {
    TempDir dir;
    Args args = good_train_args();
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--loss-log", dir.file("loss.csv")});
    if (sp) args.push_back("--sequence-parallel");
    const TrainRun r = train(dir, args);
    EXPECT_EQ(r.result.exit_code, 0) << r.result.err;
    std::vector<double> losses;
    const std::vector<std::string> log = lines_of(testing::text_of(dir.file("loss.csv")));
    for (size_t i = 1; i < log.size(); ++i) losses.push_back(std::stod(split_csv_line(log[i])[1]));
    const std::vector<std::string> rows = lines_of(testing::text_of(r.csv));
    EXPECT_EQ(rows.size(), 2u);
    if (rows.size() == 2) {
      const std::vector<std::string> cols = split_csv_line(rows[0]), row = split_csv_line(rows[1]);
      const size_t at = static_cast<size_t>(std::find(cols.begin(), cols.end(), "sequence_parallel") - cols.begin());
      EXPECT_LT(at, row.size());
      if (at < row.size()) {
        EXPECT_EQ(row[at], sp ? "1" : "0");
      }
    }
    return losses;
  };
  for (const Args& layout : {Args{"--tp", "2"}, Args{"--tp", "2", "--pp", "2"}}) {
    const std::vector<double> without = run(layout, false), with = run(layout, true);
    ASSERT_EQ(without.size(), 3u);
    ASSERT_EQ(with.size(), 3u);
    for (size_t i = 0; i < with.size(); ++i) EXPECT_NEAR(with[i], without[i], 1e-5 * without[i]) << "iteration " << i + 1;
  }
}

TEST(CliLossLog, MissingDirectoryIsRefusedBeforeTraining) {
  TempDir dir;
  Args args = good_train_args();
  args.insert(args.end(), {"--loss-log", dir.file("no/such/loss.csv")});
  const TrainRun r = train(dir, args);
  EXPECT_TRUE(IsUsageError(r.result, {"--loss-log", "does not exist"}));
  EXPECT_FALSE(fs::exists(r.csv));
}

TEST(CliSaveInit, InitialWeightsAreCheckpointZeroAndResumingFromThemRepeatsTheRun) {
  TempDir dir;
  Args first = good_train_args();
  first.insert(first.end(), {"--save-init", dir.file("init"), "--loss-log", dir.file("first.csv")});
  const TrainRun a = train(dir, first);
  ASSERT_EQ(a.result.exit_code, 0) << a.result.err;
  EXPECT_EQ(testing::text_of(dir.file("init/latest_checkpointed_iteration.txt")), "0\n");
  EXPECT_TRUE(fs::exists(dir.file("init/iter_0000000/mp_rank_00/model_optim_rng.bin")));
  Args again = good_train_args();
  again.insert(again.end(), {"--load", dir.file("init"), "--loss-log", dir.file("again.csv")});
  const TrainRun b = train(dir, again);
  ASSERT_EQ(b.result.exit_code, 0) << b.result.err;
  EXPECT_EQ(testing::text_of(dir.file("again.csv")), testing::text_of(dir.file("first.csv")));
}

TEST(CliSaveInit, CannotBeCombinedWithLoad) {
  TempDir dir;
  Args args = good_train_args();
  args.insert(args.end(), {"--save-init", dir.file("init"), "--load", dir.file("ckpt")});
  const TrainRun r = train(dir, args);
  EXPECT_TRUE(IsUsageError(r.result, {"--save-init", "--load"}));
  EXPECT_FALSE(fs::exists(dir.file("init")));
}

// f16 with dynamic loss scaling: a run resumed from a checkpoint repeats the rest of the
// uninterrupted run exactly, loss scale included (the scaler's state is in the checkpoint).
TEST(CliMixedPrecision, F16ResumeRepeatsTheRunWithTheLossScalerState) {
  TempDir dir;
  const Args f16 = {"--model", "tiny", "--precision", "f16", "--initial-loss-scale", "1e9", "--loss-scale-window", "2",
                    "--global-batch", "4", "--micro-batch", "2", "--warmup", "0"};
  auto run_f16 = [&](Args args) {
    args.insert(args.begin(), f16.begin(), f16.end());
    return train(dir, args).result;
  };
  const testing::ResumedRun run = testing::run_then_resume(dir, run_f16, 12, 6);  // resume at 6
  ASSERT_EQ(run.whole.exit_code, 0) << run.whole.err;
  ASSERT_EQ(run.rest.exit_code, 0) << run.rest.err;
  const std::vector<std::string> w = lines_of(testing::text_of(run.whole_log));
  const std::vector<std::string> r = lines_of(testing::text_of(run.rest_log));
  ASSERT_EQ(w.size(), 13u);
  ASSERT_EQ(r.size(), 7u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i], w[i + 6]);
  std::set<std::string> scales, skipped;  // the run did skip steps and change its scale
  for (size_t i = 1; i < w.size(); ++i) {
    scales.insert(split_csv_line(w[i])[4]);
    skipped.insert(split_csv_line(w[i])[5]);
  }
  EXPECT_GE(scales.size(), 3u);
  EXPECT_EQ(skipped.size(), 2u);
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Ranks as threads divide the process's threads (OMP_NUM_THREADS, which the runner sets to 1)
// among themselves instead of taking every core.
TEST(CliThreads, TrainKeepsToOmpNumThreads) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--iters", "1", "--warmup", "0", "--global-batch", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(1 CPU thread(s) per rank)"), std::string::npos) << r.out;
}

// --gemm-rate: the step's model FLOP/s against sgemm at the model's shapes, one CPU rank only.
TEST(CliThreads, GemmRateComparesTheStepWithSgemm) {
  TempDir dir;
  const CliResult r =
      run_ptdp(dir, {"train", "--model", "tiny", "--iters", "2", "--warmup", "1", "--global-batch", "2", "--gemm-rate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("gemm rate: the step runs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% of sgemm at the model's shapes (", at), std::string::npos) << r.out;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"train", "--model", "tiny", "--pp", "2", "--gemm-rate"}),
                           {"--gemm-rate", "one rank", "2 ranks"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Two runs given one --save directory: the second is refused at start (the first holds the
// directory's lock for its whole run), naming the flag, the directory and the holder's pid; a
// directory whose holder is gone (the lock free) is taken.
TEST(CliSave, ASecondWriterOfASaveDirectoryIsRefusedAtStart) {
  TempDir dir;
  const std::string ck = dir.file("ck");
  std::filesystem::create_directories(ck);
  const std::string lock = ck + "/.ptdp.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "4242\n", 5), 5);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // a run writing there now
  const std::vector<std::string> args = {"train", "--model", "tiny", "--iters", "2", "--warmup", "1", "--micro-batch",
                                         "2", "--global-batch", "4", "--save", ck};
  for (const std::string ranks : {"1", "2"}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--ranks", ranks});
    const CliResult r = run_ptdp(dir, a);
    EXPECT_TRUE(IsUsageError(r, {"--save " + ck, "another ptdp run writes there", "pid 4242"})) << r.out << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(ck + "/latest_checkpointed_iteration.txt"));
  ::close(fd);  // that run ended
  const CliResult after = run_ptdp(dir, args);
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(std::filesystem::exists(ck + "/latest_checkpointed_iteration.txt"));
}

}  // namespace
}  // namespace ptdp
