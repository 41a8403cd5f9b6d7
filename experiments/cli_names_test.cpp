// Megatron-LM's flag names as aliases of ptdp's, "did you mean" for unknown flags, --version.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/results/provenance.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::run_ptdp;
using testing::TempDir;

// A run given Megatron's names trains exactly what the same run with ptdp's names does: the same
// losses (the loss logs are equal byte for byte).
TEST(CliNames, MegatronFlagNamesRunTheSameTraining) {
  TempDir dir;
  const CliResult ours = run_ptdp(
      dir, {"train", "--model", "tiny", "--layers", "4", "--hidden", "64", "--heads", "4", "--tp", "2", "--pp", "2",
            "--micro-batch", "2", "--global-batch", "8", "--iters", "3", "--warmup", "1", "--recompute", "selective",
            "--precision", "bf16", "--zero", "1", "--dp", "2", "--loss-log", dir.file("ours.csv")});
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  const CliResult megatron = run_ptdp(
      dir, {"train", "--model", "tiny", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--micro-batch-size", "2",
            "--global-batch-size", "8", "--train-iters", "3", "--warmup", "1", "--recompute-granularity", "selective",
            "--bf16", "--use-distributed-optimizer", "--dp", "2", "--loss-log", dir.file("megatron.csv")});
  ASSERT_EQ(megatron.exit_code, 0) << megatron.err;
  EXPECT_EQ(testing::text_of(dir.file("ours.csv")), testing::text_of(dir.file("megatron.csv")));
  EXPECT_NE(megatron.out.find("t=2 p=2 d=2"), std::string::npos) << megatron.out;
  EXPECT_NE(megatron.out.find("distributed optimizer (--zero 1)"), std::string::npos) << megatron.out;
}

TEST(CliNames, AnUnknownFlagIsAnsweredWithTheClosestNames) {
  TempDir dir;
  CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--micro-bacth", "2"});
  EXPECT_TRUE(IsUsageError(r, {"--micro-bacth", "did you mean --micro-batch?"})) << r.err;
  r = run_ptdp(dir, {"train", "--model", "tiny", "--tensor-model-paralel-size=2"});
  EXPECT_TRUE(IsUsageError(r, {"did you mean --tensor-model-parallel-size?"})) << r.err;
  r = run_ptdp(dir, {"simulate", "--hardware", "a100-selene", "--model", "tiny", "--sequence-paralel"});
  EXPECT_TRUE(IsUsageError(r, {"did you mean --sequence-parallel?"})) << r.err;
  r = run_ptdp(dir, {"train", "--model", "tiny", "--completely-unrelated-thing"});
  EXPECT_TRUE(IsUsageError(r, {"--completely-unrelated-thing"})) << r.err;
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}

TEST(CliNames, VersionNamesTheCommit) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ptdp " + git_sha(), 0), 0u) << r.out;
}

}  // namespace
}  // namespace ptdp
