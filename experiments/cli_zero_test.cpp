// `ptdp train --zero 1` (the distributed optimizer) and `--zero 3` end to end: the bytes per
// parameter shrink as 8 + 8/d and 16/d (f32), a resumed run repeats the uninterrupted one
// exactly, and a checkpoint of sharded state is refused under another data-parallel size or
// without --zero.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "experiments/testing/cli_resume.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::TempDir;
using Args = std::vector<std::string>;

Args tiny(int ranks, Args extra, int pp = 2) {
  Args a = {"train", "--model", "tiny", "--pp", std::to_string(pp), "--ranks", std::to_string(ranks), "--global-batch",
            "8", "--warmup", "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

double bytes_per_parameter(const std::string& out) {
  const std::string key = "parameters (";
  const size_t at = out.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + key.size()));
}

TEST(CliZero, TheOptimizerStateShrinksWithTheDataParallelSize) {
  TempDir dir;
  // f32: weights 4 + gradients 4 + Adam's moments 8/d (the weights are the master weights).
  for (int d : {1, 2, 4}) {
    const CliResult r = run_ptdp(dir, tiny(2 * d, {"--iters", "1", "--zero", "1"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_DOUBLE_EQ(bytes_per_parameter(r.out), 8.0 + 8.0 / d) << "d=" << d;
  }
  const CliResult plain = run_ptdp(dir, tiny(8, {"--iters", "1"}));
  EXPECT_DOUBLE_EQ(bytes_per_parameter(plain.out), 16.0);
  // bf16: weights 2 + f32 gradients 4 + (master 4 + moments 8)/d.
  const CliResult bf16 = run_ptdp(dir, tiny(8, {"--iters", "1", "--zero", "1", "--precision", "bf16"}));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_DOUBLE_EQ(bytes_per_parameter(bf16.out), 6.0 + 12.0 / 4);
  // ZeRO-3: everything sharded, f32 16/d, bf16 (2 + 4 + 4 + 8)/d.
  for (int d : {2, 4}) {
    const CliResult z3 = run_ptdp(dir, tiny(d, {"--iters", "1", "--zero", "3"}, 1));
    ASSERT_EQ(z3.exit_code, 0) << z3.err;
    EXPECT_DOUBLE_EQ(bytes_per_parameter(z3.out), 16.0 / d) << "d=" << d;
  }
  const CliResult z3bf16 = run_ptdp(dir, tiny(4, {"--iters", "1", "--zero", "3", "--precision", "bf16"}, 1));
  EXPECT_DOUBLE_EQ(bytes_per_parameter(z3bf16.out), 18.0 / 4);
}

// --zero 1 at p = 2, d = 2; --zero 3 at d = 4 (bf16: master weights apart from the weights).
TEST(CliZero, AResumedRunRepeatsTheUninterruptedOneExactly) {
  for (const auto& [zero, ranks, pp, extra] :
       {std::tuple<std::string, int, int, Args>{"1", 4, 2, {}}, {"3", 4, 1, {"--precision", "bf16"}}}) {
    TempDir dir;
    auto train = [&](Args args) {
      args.insert(args.begin(), {"--zero", zero});
      args.insert(args.end(), extra.begin(), extra.end());
      return run_ptdp(dir, tiny(ranks, args, pp));
    };
    const testing::ResumedRun run = testing::run_then_resume(dir, train, 6, 3);  // resume at 3
    ASSERT_EQ(run.whole.exit_code, 0) << run.whole.err;
    ASSERT_EQ(run.rest.exit_code, 0) << run.rest.err;
    const std::vector<std::string> w = lines_of(testing::text_of(run.whole_log));
    const std::vector<std::string> r = lines_of(testing::text_of(run.rest_log));
    ASSERT_EQ(w.size(), 7u);
    ASSERT_EQ(r.size(), 4u);
    for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i], w[i + 3]) << "--zero " << zero;
  }
}

TEST(CliZero, ShardedStateLoadsOnlyUnderTheSameDataParallelSizeAndZero) {
  TempDir dir;
  const CliResult save = run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "2", "--save", dir.file("ck")}));
  ASSERT_EQ(save.exit_code, 0) << save.err;
  const CliResult wider = run_ptdp(dir, tiny(8, {"--zero", "1", "--iters", "4", "--load", dir.file("ck")}));
  EXPECT_TRUE(IsUsageError(wider, {"--load", "--zero 1 on d=2", "--zero 1 on d=4"})) << wider.err;
  const CliResult unsharded = run_ptdp(dir, tiny(4, {"--iters", "4", "--load", dir.file("ck")}));
  EXPECT_TRUE(IsUsageError(unsharded, {"--load", "sharded optimizer state"})) << unsharded.err;
  const CliResult plain = run_ptdp(dir, tiny(4, {"--iters", "2", "--save", dir.file("plain")}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult sharded = run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "4", "--load", dir.file("plain")}));
  EXPECT_TRUE(IsUsageError(sharded, {"--load", "saved without --zero"})) << sharded.err;
}

TEST(CliZero, UnknownModesAndZero3WithModelParallelismAreRefused) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, tiny(4, {"--zero", "4"})), {"--zero 4 must be 0, 1, 2 or 3"}));
  // ZeRO-2 is the simulator's (Megatron-FSDP's optim_grads under --stack mcore), not the executor's.
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, tiny(4, {"--zero", "2"})), {"--zero 2: ptdp's executor runs --zero 0, 1 or 3"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, tiny(4, {"--zero", "3"})), {"--zero 3 needs --tp 1 and --pp 1"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"simulate", "--model", "tiny", "--hardware", "a100-selene", "--tp", "2", "--ranks", "4", "--zero", "3"}),
                           {"--zero 3 needs --tp 1 and --pp 1"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// --zero 1's pieces are chunks of the gradient buckets: a checkpoint resumed under another
// --grad-bucket-size would read scrambled optimizer state. It is refused, naming the flag, both
// values and the file; the same size resumes.
TEST(CliZero, ShardedStateLoadsOnlyUnderTheSameGradBucketSize) {
  TempDir dir;
  const CliResult save = run_ptdp(
      dir, tiny(4, {"--zero", "1", "--iters", "2", "--grad-bucket-size", "4096", "--save", dir.file("ck")}));
  ASSERT_EQ(save.exit_code, 0) << save.err;
  for (const std::string other : {"8192", "2048"}) {
    const CliResult r = run_ptdp(
        dir, tiny(4, {"--zero", "1", "--iters", "4", "--grad-bucket-size", other, "--load", dir.file("ck")}));
    EXPECT_TRUE(IsUsageError(r, {"--load", "zero_dp_rank_000.bin", "was saved with --grad-bucket-size 4096",
                                 "this run has --grad-bucket-size " + other}))
        << r.err;
  }
  const CliResult same = run_ptdp(
      dir, tiny(4, {"--zero", "1", "--iters", "4", "--grad-bucket-size", "4096", "--load", dir.file("ck")}));
  EXPECT_EQ(same.exit_code, 0) << same.err;
}

// A checkpoint is one unit: ZeRO shards left from an earlier save beside a newer plain save of
// the same iteration, or a shard copied in from another run, are refused naming the file.
TEST(CliZero, AShardOfAnotherSaveIsRefused) {
  TempDir dir;
  namespace fs = std::filesystem;
  ASSERT_EQ(run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "2", "--save", dir.file("ck")})).exit_code, 0);
  ASSERT_EQ(run_ptdp(dir, tiny(4, {"--iters", "2", "--save", dir.file("ck")})).exit_code, 0);  // plain, same dir
  const CliResult stale = run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "4", "--load", dir.file("ck")}));
  EXPECT_TRUE(IsUsageError(stale, {"--load", "zero_dp_rank_00", "belongs to save", "save_id.txt"})) << stale.err;

  ASSERT_EQ(run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "2", "--save", dir.file("a")})).exit_code, 0);
  ASSERT_EQ(run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "2", "--lr", "3e-4", "--save", dir.file("b")})).exit_code,
            0);
  const std::string shard = "iter_0000002/mp_rank_00_001/zero_dp_rank_001.bin";
  fs::copy_file(dir.file("b/" + shard), dir.file("a/" + shard), fs::copy_options::overwrite_existing);
  const CliResult foreign = run_ptdp(dir, tiny(4, {"--zero", "1", "--iters", "4", "--load", dir.file("a")}));
  EXPECT_TRUE(IsUsageError(foreign, {"--load", "zero_dp_rank_001.bin", "belongs to save"})) << foreign.err;
}

}  // namespace
}  // namespace ptdp
