// End-to-end tests of `ptdp simulate` and `ptdp plan`: the contract's row with mode=simulate,
// the plan table beside the paper's heuristic, and bad input (unknown or broken profiles,
// layouts that cannot fit, inconsistent --gpus): one clear line, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::split_csv_line;
using testing::TempDir;
using Args = std::vector<std::string>;

const Args kOneT = {"simulate", "--model", "gpt-1t", "--tp", "8", "--pp", "64", "--gpus", "3072",
                    "--global-batch", "3072", "--recompute", "full", "--hardware", "a100-selene"};

std::string column(const std::vector<std::string>& header, const std::vector<std::string>& row, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i < row.size() ? row[i] : "";
  ADD_FAILURE() << "no column " << name;
  return "";
}

// simulate lists and takes only the flags its iteration depends on: a training run's flags
// (iterations, data, checkpoints, the optimizer, logging) are absent from its --help and refused.
TEST(SimCli, TrainingFlagsAreNotSimulatesAndAreRefused) {
  TempDir dir;
  const CliResult help = run_ptdp(dir, {"simulate", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  for (const char* flag : {"--lr ", "--iters", "--seed", "--save ", "--load ", "--data", "--recipe", "--comm ",
                           "--backend", "--loss-scale", "--log-interval", "--eval-iters", "--adam-beta1",
                           "--grad-bucket-size", "--loss-log", "--weight-decay"})
    EXPECT_EQ(help.out.find(flag), std::string::npos) << flag << " in simulate --help";
  for (const char* flag : {"--tp", "--global-batch", "--precision", "--fp16", "--csv", "--experiment", "--ranks",
                           "--overlap-grad-reduce", "--stack", "--hardware", "--rotary-base"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " not in simulate --help";
  for (const Args& extra : {Args{"--lr", "0.1"}, Args{"--iters", "5"}, Args{"--save", dir.file("ck")},
                            Args{"--recipe", "llama"}, Args{"--comm=mpi"}}) {
    Args args = kOneT;
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string flag = extra[0].substr(0, extra[0].find('='));
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {flag + " is not a flag of ptdp simulate (ptdp train takes it)"}))
        << flag;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("ck")));
}

TEST(SimCli, SimulateAppendsTheContractRowWithModeSimulate) {
  TempDir dir;
  Args args = kOneT;
  args.insert(args.end(), {"--csv", dir.file("sim.csv")});
  const CliResult r = run_ptdp(dir, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("TFLOP/s per GPU"), std::string::npos) << r.out;
  const auto lines = lines_of(testing::text_of(dir.file("sim.csv")));
  ASSERT_EQ(lines.size(), 2u);
  const auto header = split_csv_line(lines[0]), row = split_csv_line(lines[1]);
  EXPECT_EQ(header.front(), "experiment");
  EXPECT_EQ(column(header, row, "mode"), "simulate");
  EXPECT_EQ(column(header, row, "experiment"), "simulate");
  EXPECT_EQ(column(header, row, "backend"), "a100-selene");
  EXPECT_EQ(column(header, row, "device"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(column(header, row, "precision"), "f16");
  EXPECT_EQ(column(header, row, "gpus"), "3072");
  EXPECT_EQ(column(header, row, "dp"), "6");
  EXPECT_EQ(column(header, row, "num_microbatches"), "512");
  const double tflops = std::stod(column(header, row, "tflops_per_gpu"));
  EXPECT_NEAR(tflops, 163, 0.1 * 163);  // Table 1
  EXPECT_GT(std::stod(column(header, row, "bubble_fraction")), 0.1);
  EXPECT_LT(std::stod(column(header, row, "peak_mem_gb")), 85.9);
  EXPECT_EQ(column(header, row, "loss"), "");
  // The first stage's breakdown, as train reports rank 0's: 512 forward sends of b*s*h/t fp16.
  EXPECT_EQ(column(header, row, "p2p_bytes"), std::to_string(512LL * 2048 * 25600 * 2 / 8));
  for (const char* c : {"fwd_ms", "bwd_ms", "dp_ms", "optimizer_ms", "activation_gb"})
    EXPECT_GT(std::stod(column(header, row, c)), 0) << c;
  EXPECT_GT(std::stod(column(header, row, "bwd_ms")), 2 * std::stod(column(header, row, "fwd_ms")));
}

// --stack names the software modelled; it is in the header line and the row, and the later code is
// faster on the same layout. A stack that does not exist is refused naming the flag.
TEST(SimCli, StackIsPrintedRecordedAndChecked) {
  TempDir dir;
  std::map<std::string, double> ms;
  for (const char* stack : {"megatron-2021", "megatron-2022"}) {
    Args args = kOneT;
    args.insert(args.end(), {"--stack", stack, "--csv", dir.file(std::string(stack) + ".csv")});
    const CliResult r = run_ptdp(dir, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("stack ") + stack), std::string::npos) << r.out;
    const auto lines = lines_of(testing::text_of(dir.file(std::string(stack) + ".csv")));
    ASSERT_EQ(lines.size(), 2u);
    const auto header = split_csv_line(lines[0]), row = split_csv_line(lines[1]);
    EXPECT_EQ(column(header, row, "stack"), stack);
    EXPECT_EQ(column(header, row, "sequence_parallel"), "0");
    EXPECT_GT(std::stod(column(header, row, "layer_bwd_ms")), std::stod(column(header, row, "layer_fwd_ms")));
    ms[stack] = std::stod(column(header, row, "iter_time_ms"));
  }
  EXPECT_LT(ms["megatron-2022"], ms["megatron-2021"]);
  Args bad = kOneT;
  bad.insert(bad.end(), {"--stack", "megatron-2019"});
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, bad), {"--stack 'megatron-2019' must be megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp"}));
}

TEST(SimCli, UnknownProfileIsAUsageError) {
  TempDir dir;
  Args args = kOneT;
  args.back() = "no-such-gpu";
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {"--hardware 'no-such-gpu'", "a100-selene"}));
}

TEST(SimCli, BrokenProfileNamesTheFileAndTheField) {
  TempDir dir;
  // The source tree: this file is experiments/sim_cli_test.cpp in it.
  const auto root = std::filesystem::path(__FILE__).parent_path().parent_path();
  std::ifstream in(root / "hardware" / "a100-selene.toml");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bad = std::regex_replace(ss.str(), std::regex("bandwidth_gbs = \\{ value = 2039"),
                                             "bandwidth_gbs = { value = -2039");
  const std::string path = dir.file("broken.toml");
  std::ofstream(path) << bad;
  Args args = kOneT;
  args.back() = path;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {path, "memory.bandwidth_gbs", "positive"}));
  std::ofstream(path) << "name = \"x\"\n";  // most fields missing
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, args), {path, "missing"}));
}

TEST(SimCli, LayoutThatCannotFitIsAnOutOfMemoryVerdictAndNoRow) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"simulate", "--model", "gpt-1t", "--tp", "8", "--global-batch", "8",
                                     "--hardware", "a100-selene", "--csv", dir.file("oom.csv")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("ptdp: out of memory: stage 0 needs ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("of the 85.9 GB of NVIDIA A100-SXM4-80GB"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("oom.csv")));
}

TEST(SimCli, GpusMustMatchTheLayout) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"simulate", "--model", "gpt-1t", "--tp", "8", "--pp", "64", "--gpus",
                                          "1000", "--hardware", "a100-selene"}),
                           {"--gpus 1000", "--tp 8", "--pp 64"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"simulate", "--model", "gpt-1t", "--gpus", "0", "--hardware", "a100-selene"}),
                           {"--gpus 0", "positive"}));
}

TEST(SimCli, CpuProfileRefusesHalfPrecision) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"simulate", "--model", "small", "--precision", "f16", "--hardware", "cpu"}),
                           {"--precision f16"}));
  EXPECT_EQ(run_ptdp(dir, {"simulate", "--model", "small", "--micro-batch", "4", "--hardware", "cpu"}).exit_code, 0);
}

TEST(SimCli, PlanPrintsTheBestLayoutsBesideThePapersHeuristic) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"plan", "--model", "gpt-1t", "--gpus", "3072", "--global-batch", "3072",
                                     "--hardware", "a100-selene", "--top", "3", "--csv", dir.file("plan.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank   t    p     d"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\n +1 +8 +64 +6 +1 +1 +512 +1f1b +full"))) << r.out;
  EXPECT_NE(r.out.find("paper heuristic: t = 8"), std::string::npos) << r.out;
  EXPECT_EQ(lines_of(testing::text_of(dir.file("plan.csv"))).size(), 4u);  // header + 3 rows
}

// Under mcore the search has c: a c column, and why under each layout with c > 1; simulate names
// the layout's c and refuses it under a stack without context parallelism.
TEST(SimCli, PlanSearchesContextParallelismAndSaysWhy) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"plan", "--model", "llama3.1-405b", "--gpus", "576", "--global-batch", "252",
                                     "--hardware", "h100-dgx", "--stack", "mcore", "--zero-modes", "1",
                                     "--micro-batches", "1", "--top", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank   t  c    p     d"), std::string::npos) << r.out;
  // The best layout has context parallelism (c = 4 at p 6 in the model, c = 2 at p 18 2.3% behind)
  // and says why: without it the layout does not fit.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\n +1 +8 +[24] +[0-9]+ +[0-9]+ +[0-9]+ +1 +[0-9]+ +interleaved")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("why c = [24]: memory: with c = 1 \\(d = "))) << r.out;
  const std::vector<std::string> layout = {"simulate", "--model", "llama3.1-405b", "--tp", "8", "--pp", "18",
                                           "--context-parallel-size", "2", "--gpus", "576", "--zero", "1",
                                           "--hardware", "h100-dgx", "--global-batch", "252", "--schedule",
                                           "interleaved", "--vpp", "7", "--sequence-parallel"};
  std::vector<std::string> mcore = layout;
  mcore.insert(mcore.end(), {"--stack", "mcore"});
  const CliResult s = run_ptdp(dir, mcore);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("layout t=8 c=2 (p2p) p=18 d=2"), std::string::npos) << s.out;
  std::vector<std::string> old = layout;
  old.insert(old.end(), {"--stack", "megatron-2022"});
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, old), {"--context-parallel-size 2: --stack megatron-2022 has no context "
                                                "parallelism"}));
}

// --fp8-format: simulated under --stack mcore on a profile with an FP8 peak; refused elsewhere,
// and by `train` (ptdp's executor has no FP8), each naming the flag.
TEST(SimCli, Fp8IsSimulatedUnderMcoreOnHopperAndRefusedElsewhere) {
  TempDir dir;
  const std::vector<std::string> run = {"simulate", "--model", "llama3-8b", "--gpus", "8", "--fp8-format", "hybrid"};
  std::vector<std::string> ok = run;
  ok.insert(ok.end(), {"--tp", "2", "--zero", "1", "--recompute", "full", "--stack", "mcore", "--hardware", "h100-dgx"});
  const CliResult s = run_ptdp(dir, ok);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  std::vector<std::string> gather = ok;
  gather.push_back("--fp8-param-gather");
  const CliResult g = run_ptdp(dir, gather);
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out, s.out);  // the weights' memory and gather differ
  std::vector<std::string> no_fp8 = {"simulate", "--model", "llama3-8b", "--gpus", "8", "--fp8-param-gather", "--stack",
                                     "mcore", "--hardware", "h100-dgx"};
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, no_fp8), {"--fp8-param-gather", "needs --fp8-format e4m3 or hybrid"}));
  std::vector<std::string> old = run;
  old.insert(old.end(), {"--stack", "megatron-2022", "--hardware", "h100-dgx"});
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, old), {"--fp8-format hybrid: --stack megatron-2022 has no FP8 model"}));
  std::vector<std::string> ampere = run;
  ampere.insert(ampere.end(), {"--stack", "mcore", "--hardware", "a100-selene"});
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, ampere), {"--fp8-format hybrid: hardware profile 'a100-selene'"}));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"train", "--model", "tiny", "--fp8-format", "e4m3"}),
                           {"--fp8-format is not a flag of ptdp train"}));
}

TEST(SimCli, PlanWithNothingFittingSaysSo) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"plan", "--model", "gpt-1t", "--gpus", "8", "--global-batch", "8", "--hardware",
                                     "a100-selene"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ptdp: out of memory: no layout of model gpt-1t fits on 8 x NVIDIA A100-SXM4-80GB"),
            std::string::npos)
      << r.err;
}

TEST(SimCli, PlanRefusesBadNumbers) {
  TempDir dir;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"plan", "--model", "gpt-1t", "--gpus", "0", "--global-batch", "8",
                                          "--hardware", "a100-selene"}),
                           {"--gpus 0"}));
  // 11 GPUs: no t, p, d, and 11 stages of 3 layers leave none of the 24 to the ends (7 GPUs would
  // do: 7 stages of 2 | 4 x 5 | 2 layers).
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"plan", "--model", "gpt-1.7b", "--gpus", "11", "--global-batch", "512",
                                          "--hardware", "a100-selene"}),
                           {"--gpus 11", "--global-batch 512"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// The SC'21 code (--stack megatron-2021, the default) had no sequence parallelism: asking for it
// is refused, naming both flags, in simulate and in a reproduce spec; the later stacks take it.
TEST(SimCli, SequenceParallelUnderAStackWithoutItIsRefused) {
  TempDir dir;
  const Args base = {"simulate", "--model", "gpt-1.7b", "--tp", "2", "--gpus", "8", "--global-batch", "64",
                     "--hardware", "a100-selene", "--sequence-parallel"};
  for (const Args& extra : {Args{"--stack", "megatron-2021"}, Args{}}) {
    Args a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = run_ptdp(dir, a);
    EXPECT_TRUE(IsUsageError(r, {"--sequence-parallel", "--stack megatron-2021 has no sequence parallelism"}))
        << r.out << r.err;
  }
  Args ok = base;
  ok.insert(ok.end(), {"--stack", "megatron-2022"});
  EXPECT_EQ(run_ptdp(dir, ok).exit_code, 0);
  const std::string spec = dir.file("sp.toml");
  std::ofstream(spec) << "name = \"sp\"\ntitle = \"t\"\nmetric = \"tflops_per_gpu\"\npaper = \"none\"\n[base]\n"
                         "model = \"tiny\"\nprecision = \"f32\"\ntp = 2\nglobal_batch = 8\n"
                         "[[series]]\nname = \"s\"\n[[points]]\nx = \"1\"\nsequence_parallel = true\n"
                         "stack = \"megatron-2021\"\n";
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"reproduce", spec, "--dry-run"}),
                           {"sp.toml", "x '1'", "--stack megatron-2021 has no sequence parallelism"}));
}

// --recompute-activation is ptdp's executor's: simulated under --stack ptdp only (Megatron keeps the
// GeLU's output for fc2's weight gradient).
TEST(SimCli, RecomputeActivationOutsideThePtdpStackIsRefused) {
  TempDir dir;
  const Args base = {"simulate", "--model", "gpt-1.7b", "--gpus", "1", "--hardware", "h200", "--precision", "bf16",
                     "--recompute", "none", "--recompute-activation"};
  for (const std::string stack : {"megatron-2021", "mcore"}) {
    Args a = base;
    a.insert(a.end(), {"--stack", stack});
    const CliResult r = run_ptdp(dir, a);
    EXPECT_TRUE(IsUsageError(r, {"--recompute-activation: --stack " + stack + " keeps the MLP's activation output"}))
        << r.out << r.err;
  }
  Args ok = base;
  ok.insert(ok.end(), {"--stack", "ptdp"});
  const CliResult r = run_ptdp(dir, ok);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Selective recomputation came with sequence parallelism (Korthikanti et al. 2022): the SC'21 code
// and Megatron-DeepSpeed's checkpoint whole layers only, so --recompute selective under them is
// refused naming both flags; the planner never picks it there.
TEST(SimCli, SelectiveRecomputeUnderAStackWithoutItIsRefused) {
  TempDir dir;
  const Args base = {"simulate", "--model", "gpt-1.7b", "--tp", "2", "--gpus", "8", "--global-batch", "64",
                     "--hardware", "a100-selene", "--recompute", "selective"};
  for (const std::string stack : {"megatron-2021", "megatron-deepspeed"}) {
    Args a = base;
    a.insert(a.end(), {"--stack", stack});
    const CliResult r = run_ptdp(dir, a);
    EXPECT_TRUE(IsUsageError(r, {"--recompute selective", "--stack " + stack + " has no selective recomputation"}))
        << r.out << r.err;
  }
  for (const std::string stack : {"megatron-2022", "mcore"}) {
    Args a = base;
    a.insert(a.end(), {"--stack", stack});
    EXPECT_EQ(run_ptdp(dir, a).exit_code, 0) << stack;
  }
  const CliResult plan = run_ptdp(dir, {"plan", "--model", "gpt-1.7b", "--gpus", "64", "--global-batch", "512",
                                        "--hardware", "a100-selene", "--top", "40"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.out.find("selective"), std::string::npos) << plan.out;
}

// DeepSpeed's pipeline engine has one schedule, no ZeRO-3 with a pipeline, and trains bf16 through
// its own ZeRO-1: what it cannot run is refused before anything is simulated, and nothing written.
TEST(SimCli, WhatDeepSpeedsEngineDoesNotRunIsRefused) {
  TempDir dir;
  const Args base = {"simulate", "--model", "gpt-1.7b", "--tp", "2", "--pp", "2", "--gpus", "16", "--global-batch",
                     "64", "--hardware", "a100-jeanzay", "--stack", "megatron-deepspeed", "--csv", dir.file("r.csv")};
  auto with = [&](Args extra) {
    Args a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_ptdp(dir, a);
  };
  EXPECT_TRUE(IsUsageError(with({"--schedule", "interleaved", "--vpp", "2", "--zero", "1"}),
                           {"--schedule interleaved: --stack megatron-deepspeed runs DeepSpeed's pipeline engine",
                            "use --schedule 1f1b"}));
  EXPECT_TRUE(IsUsageError(with({}), {"--precision bf16 with --zero 0", "BF16_Optimizer", "use --zero 1"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.csv")));
  const CliResult ok = with({"--zero", "1"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("data-parallel all-reduce (DeepSpeed's ZeRO-1) "), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find(", parameter all-gather (not hidden by the next forward) "), std::string::npos) << ok.out;
}

// --attention-backend in the simulator: ptdp's choices under --stack ptdp (auto as unfused; cudnn's
// fused attention; flash refused until a GPU has measured it); the other stacks their own only.
TEST(SimCli, AttentionBackendChoosesPtdpsKernelsUnderItsStack) {
  TempDir dir;
  const Args base = {"simulate", "--layers", "24", "--hidden", "2048", "--heads", "16", "--seq-length", "2048",
                     "--vocab-size", "51200", "--micro-batch", "4", "--global-batch", "4", "--hardware", "h200",
                     "--csv", dir.file("r.csv")};  // the profile's precision: bf16
  auto with = [&](Args extra) {
    Args a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_ptdp(dir, a);
  };
  auto tokens = [](const CliResult& r) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex(", ([0-9]+) tokens/s per GPU"))) << r.out;
    return m.size() > 1 ? std::stod(m[1].str()) : 0.0;
  };
  auto memory = [](const CliResult& r) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex("memory: fits: stage 0 needs ([0-9.]+) GB"))) << r.out;
    return m.size() > 1 ? std::stod(m[1].str()) : 0.0;
  };
  const CliResult unfused = with({"--stack", "ptdp", "--attention-backend", "unfused"});
  const CliResult automatic = with({"--stack", "ptdp"});
  const CliResult cudnn = with({"--stack", "ptdp", "--attention-backend", "cudnn"});
  for (const CliResult* r : {&unfused, &automatic, &cudnn}) ASSERT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(tokens(automatic), tokens(unfused));
  // No s x s scores: faster, and 2 bytes a score fewer kept (GPT 1.3B, b 4: 12.9 GB of activations).
  EXPECT_GT(tokens(cudnn), 1.1 * tokens(unfused));
  EXPECT_LT(memory(cudnn), memory(unfused) - 10);
  EXPECT_TRUE(IsUsageError(with({"--stack", "ptdp", "--attention-backend", "flash"}),
                           {"--attention-backend flash: ptdp's flash kernel", "no rate in the performance model"}));
  EXPECT_TRUE(IsUsageError(with({"--stack", "ptdp", "--attention-backend", "cudnn", "--precision", "f32"}),
                           {"--attention-backend cudnn: cuDNN's fused attention takes bf16 or f16"}));
  EXPECT_TRUE(IsUsageError(with({"--stack", "mcore", "--attention-backend", "unfused"}),
                           {"--attention-backend unfused: --stack mcore runs its own attention", "use auto or cudnn"}));
  EXPECT_TRUE(IsUsageError(with({"--stack", "megatron-2021", "--attention-backend", "cudnn"}),
                           {"--attention-backend cudnn: --stack megatron-2021 runs its own attention", "use auto or unfused"}));
  EXPECT_EQ(with({"--stack", "mcore", "--attention-backend", "cudnn"}).exit_code, 0);
  EXPECT_EQ(with({"--stack", "megatron-2021", "--attention-backend", "unfused"}).exit_code, 0);
}

// --zero 2 (ZeRO-2, Megatron-FSDP's optim_grads) is modelled under --stack mcore only; simulate and
// plan refuse it elsewhere, train everywhere; a refused run writes no row.
TEST(SimCli, ZeroTwoIsMcoresAndTheSimulatorsOnly) {
  TempDir dir;
  const Args base = {"simulate", "--model", "llama3-8b", "--tp", "8", "--gpus", "64", "--global-batch", "64",
                     "--sequence-parallel", "--hardware", "h100-dgx", "--zero", "2", "--csv", dir.file("r.csv")};
  auto with = [&](Args extra) {
    Args a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_ptdp(dir, a);
  };
  EXPECT_TRUE(IsUsageError(with({"--stack", "megatron-2022"}), {"--zero 2: --stack megatron-2022 has no ZeRO-2 model",
                                                                  "use --zero 0 or 1, or --stack mcore"}));
  EXPECT_TRUE(IsUsageError(with({"--stack", "ptdp"}), {"--zero 2: --stack ptdp has no ZeRO-2 model"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.csv")));
  const CliResult ok = with({"--stack", "mcore"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("ZeRO-2 (optimizer state and gradients sharded)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("data-parallel reduce-scatters of every backward: not hidden by the backward "),
            std::string::npos)
      << ok.out;
  EXPECT_NE(ok.out.find("ZeRO-2 over 8 ranks"), std::string::npos) << ok.out;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                                          "--hardware", "h100-dgx", "--zero-modes", "1,2"}),
                           {"--zero-modes 2: --stack megatron-2021 has no ZeRO-2 model"}));
  const CliResult plan = run_ptdp(dir, {"plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                                        "--hardware", "h100-dgx", "--stack", "mcore", "--zero-modes", "2", "--top",
                                        "1", "--max-cp", "1"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  // The best layout's row: rank t c p d v b m schedule recompute zero ...
  const size_t row = plan.out.find("\n    1 ");
  ASSERT_NE(row, std::string::npos) << plan.out;
  std::istringstream cols(plan.out.substr(row + 1));
  std::string col;
  for (int i = 0; i < 11; ++i) cols >> col;
  EXPECT_EQ(col, "2") << plan.out;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"train", "--model", "tiny", "--dp", "2", "--zero", "2"}),
                           {"--zero 2: ptdp's executor runs --zero 0, 1 or 3"}));
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// A CPU profile records the CPU it was measured on (cpu_model); simulate and plan warn when used
// on another CPU (after the flags are checked), and say nothing on that CPU.
TEST(SimCli, ACpuProfileMeasuredOnAnotherCpuIsNamed) {
  TempDir dir;
  const std::string base = testing::text_of(testing::source_file("hardware/cpu.toml"));
  const std::regex model("\ncpu_model = \"[^\"]*\"");
  ASSERT_TRUE(std::regex_search(base, model));
  const std::string other =
      testing::write_text(dir, "other.toml", std::regex_replace(base, model, "\ncpu_model = \"Imaginary CPU 9000\""));
  const std::string warning = "ptdp: warning: profile cpu (" + other + ") was measured on a 'Imaginary CPU 9000' CPU";
  const CliResult s = run_ptdp(dir, {"simulate", "--model", "small", "--micro-batch", "4", "--hardware", other});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find(warning), std::string::npos) << s.err;
  const CliResult p =
      run_ptdp(dir, {"plan", "--model", "small", "--gpus", "1", "--global-batch", "8", "--hardware", other});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find(warning), std::string::npos) << p.err;
  // A flag the profile refuses is the one line on stderr, whatever CPU runs it.
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"simulate", "--model", "small", "--precision", "f16", "--hardware", other}),
                           {"--precision f16"}));
  EXPECT_TRUE(IsUsageError(
      run_ptdp(dir, {"plan", "--model", "small", "--gpus", "1", "--global-batch", "8", "--layers", "0", "--hardware",
                     other}),
      {"--layers"}));
  const CliResult none = run_ptdp(dir, {"simulate", "--model", "small", "--micro-batch", "4", "--hardware",
                                        testing::write_text(dir, "none.toml", std::regex_replace(base, model, ""))});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.err.find("warning"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace ptdp
