// Megatron-LM's flag names as aliases of ptdp's, "did you mean" for unknown flags, --version.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/cpu/blas_core.h"
#include "core/results/provenance.h"
#include "core/testing/scoped_env.h"
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

// --log-format megatron prints Megatron-LM's training_log line, which its parsers read: the
// iteration, consumed samples, time and "lm loss" (averaged over the interval's iterations) in
// Megatron's keys and formats. As in Megatron, the first iteration's line starts no new interval:
// with --log-interval 1 the second line averages iterations 1 and 2, the others are the loss log's.
TEST(CliNames, MegatronLogLinesCarryItsKeysAndTheSameLosses) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"train", "--model", "tiny", "--global-batch", "8", "--micro-batch", "4", "--iters",
                                     "4", "--warmup", "1", "--log-format", "megatron", "--loss-log", dir.file("l.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex line(
      R"( \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration +(\d+)/ +4 \| consumed samples: +(\d+) \| elapsed )"
      R"(time per iteration \(ms\): [\d.]+ \| throughput per GPU \(TFLOP/s/GPU\): [\d.]+ \| learning rate: )"
      R"([\d.]+E[-+]\d+ \| global batch size: +8 \| lm loss: ([\d.]+E[-+]\d+) \| loss scale: 1\.0 \| grad norm: [\d.]+ )"
      R"(\| number of skipped iterations: +0 \| number of nan iterations: +0 \|)");
  std::istringstream out(r.out), log(testing::text_of(dir.file("l.csv")));
  std::string text, row;
  std::getline(log, row);  // header
  std::vector<double> logged;
  while (std::getline(log, row)) logged.push_back(std::stod(row.substr(row.find(',') + 1)));
  ASSERT_EQ(logged.size(), 4u);
  const double expected[] = {logged[0], (logged[0] + logged[1]) / 2, logged[2], logged[3]};
  int seen = 0;
  while (std::getline(out, text)) {
    std::smatch m;
    if (!std::regex_match(text, m, line)) continue;
    ++seen;
    const int it = std::stoi(m[1]);
    ASSERT_EQ(it, seen) << text;
    EXPECT_EQ(std::stoi(m[2]), 8 * it);
    EXPECT_NEAR(std::stod(m[3]), expected[it - 1], 1e-6 * expected[it - 1]) << text;
  }
  EXPECT_EQ(seen, 4) << r.out;
}

TEST(CliNames, VersionNamesTheCommit) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ptdp " + git_sha(), 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nblas: OpenBLAS "), std::string::npos) << r.out;
#ifdef PTDP_VGPU
  EXPECT_NE(r.out.find("\ncudnn: none (the virtual GPU has no cuDNN"), std::string::npos) << r.out;
#elif defined(PTDP_HAVE_CUDA)
  EXPECT_NE(r.out.find("\ncudnn: "), std::string::npos) << r.out;
#endif
}

// ptdp never runs OpenBLAS's SSE3 fallback on a CPU with AVX2 and FMA: where this OpenBLAS does
// not know the CPU, ptdp starts again with OPENBLAS_CORETYPE set, and --version says so. A kernel
// set the user names is kept, the fallback too.
TEST(CliNames, VersionNamesTheBlasKernelsAndAUsersChoiceIsKept) {
  TempDir dir;
  testing::ScopedEnv core("OPENBLAS_CORETYPE"), fallback("PTDP_BLAS_FALLBACK");
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("PTDP_BLAS_FALLBACK");
  const CliResult r = run_ptdp(dir, {"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const cpu::CpuFeatures f = cpu::cpu_features();
  if (f.avx2 && f.fma) {
    EXPECT_EQ(r.out.find(", Prescott kernels"), std::string::npos) << r.out;
  }
  // Set by ptdp exactly where this process's OpenBLAS (started with the variable unset or not) fell back.
  const bool fell_back = r.out.find("set by ptdp: OpenBLAS does not know this CPU and chose Prescott)") !=
                         std::string::npos;
  if (fell_back) {
    EXPECT_TRUE(f.avx2 && f.fma) << r.out;
  } else {
    EXPECT_EQ(r.out.find("OPENBLAS_CORETYPE"), std::string::npos) << r.out;
  }

  ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  const CliResult chosen = run_ptdp(dir, {"--version"});
  EXPECT_NE(chosen.out.find("\nblas: OpenBLAS 0."), std::string::npos) << chosen.out;
  EXPECT_NE(chosen.out.find(", Prescott kernels (OPENBLAS_CORETYPE=Prescott)\n"), std::string::npos) << chosen.out;
}

}  // namespace
}  // namespace ptdp
