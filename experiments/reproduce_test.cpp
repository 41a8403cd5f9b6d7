// End-to-end tests of `ptdp reproduce` and of the plotting script: one row per configuration
// with the contract's columns, resume (configurations already in the CSV are skipped, --force
// replaces them), an interrupted sweep (SIGINT) keeps every completed row and a rerun completes
// it without duplicates, a real small-scale run measures loss and time, bad input is refused with
// one line and nothing written, and plots/figures.py refuses a malformed CSV with one line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "core/testing/scoped_env.h"
#include "experiments/testing/cli_runner.h"

#ifndef PTDP_SOURCE_DIR
#error "PTDP_SOURCE_DIR must be defined by the build"
#endif

namespace ptdp {
namespace {

using testing::CliResult;
using testing::IsUsageError;
using testing::lines_of;
using testing::run_ptdp;
using testing::split_csv_line;
using testing::text_of;
using testing::TempDir;
namespace fs = std::filesystem;


// The data rows of a result CSV as column -> value maps (checks every row's field count).
std::vector<std::map<std::string, std::string>> rows_of(const std::string& path) {
  std::vector<std::map<std::string, std::string>> out;
  if (!fs::exists(path)) return out;
  const auto lines = lines_of(text_of(path));
  if (lines.empty()) return out;
  const auto header = split_csv_line(lines[0]);
  EXPECT_EQ(header.front(), "experiment");
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    EXPECT_EQ(f.size(), header.size()) << path << " line " << i + 1 << " is not a whole row: " << lines[i];
    std::map<std::string, std::string> r;
    for (size_t k = 0; k < header.size() && k < f.size(); ++k) r[header[k]] = f[k];
    out.push_back(r);
  }
  return out;
}

std::string key_of(const std::map<std::string, std::string>& r) {
  std::string k;
  for (const char* c : {"experiment", "mode", "backend", "model", "tp", "pp", "dp", "vpp", "micro_batch",
                        "global_batch", "schedule", "recompute", "scatter_gather", "precision"})
    k += r.at(c) + "|";
  return k;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// --plan-jobs: the launches a cluster needs, one per world size, with nodes and sbatch lines;
// nothing is written.
TEST(ReproduceCli, PlanJobsPrintsOneLaunchPerWorldSize) {
  TempDir dir;
  const std::string out = dir.file("out");
  const CliResult r = run_ptdp(dir, {"reproduce", "fig13", "--mode", "run", "--plan-jobs", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("64 ranks on 8 node(s): fig13 (10 configuration(s))"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sbatch --nodes=8 --ntasks=64 --ntasks-per-node=8 scripts/launch/ptdp.sbatch reproduce fig13 "
                       "--mode run --scale paper --out " + out),
            std::string::npos)
      << r.out;
  const CliResult four = run_ptdp(dir, {"reproduce", "fig13", "--mode", "run", "--plan-jobs", "--gpus-per-node", "4",
                                        "--out", out});
  EXPECT_NE(four.out.find("64 ranks on 16 node(s)"), std::string::npos) << four.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"reproduce", "fig13", "--plan-jobs", "--out", out}),
                           {"--plan-jobs plans the launches of --mode run"}));
}

// --plan-jobs books only what a launch runs: Fig. 6 (a formula) nothing, Fig. 8 (one rank's
// measurements) one rank; at --scale small the ranks are CPU processes, so no nodes or GPUs.
TEST(ReproduceCli, PlanJobsBooksOnlyWhatALaunchRuns) {
  TempDir dir;
  const std::string out = dir.file("out");
  const CliResult fig6 = run_ptdp(dir, {"reproduce", "fig6", "--mode", "run", "--plan-jobs", "--out", out});
  ASSERT_EQ(fig6.exit_code, 0) << fig6.err;
  EXPECT_NE(fig6.out.find("fig6: the paper's formula (p-1)/m, nothing to run or launch"), std::string::npos) << fig6.out;
  EXPECT_EQ(fig6.out.find("node(s)"), std::string::npos) << fig6.out;
  EXPECT_EQ(fig6.out.find("sbatch"), std::string::npos) << fig6.out;
  const CliResult fig8 = run_ptdp(dir, {"reproduce", "fig8", "--mode", "run", "--plan-jobs", "--out", out});
  ASSERT_EQ(fig8.exit_code, 0) << fig8.err;
  EXPECT_NE(fig8.out.find("1 launch(es)"), std::string::npos) << fig8.out;
  EXPECT_NE(fig8.out.find("     1 ranks on 1 node(s): fig8 (10 estimate(s) from one rank's measurements)"),
            std::string::npos)
      << fig8.out;
  EXPECT_NE(fig8.out.find("sbatch --nodes=1 --ntasks=1 --ntasks-per-node=1 scripts/launch/ptdp.sbatch reproduce fig8"),
            std::string::npos)
      << fig8.out;
  const CliResult small =
      run_ptdp(dir, {"reproduce", "fig13", "--mode", "run", "--scale", "small", "--plan-jobs", "--out", out});
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(small.out.find("node"), std::string::npos) << small.out;
  EXPECT_EQ(small.out.find("GPUs per node"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("no GPUs"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("mpirun -np 64 --oversubscribe build/ptdp reproduce fig13 --mode run --scale small --out " + out),
            std::string::npos)
      << small.out;
  EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"reproduce", "fig13", "--mode", "run", "--scale", "small", "--plan-jobs",
                                          "--gpus-per-node", "4", "--out", out}),
                           {"--gpus-per-node 4: --scale small runs CPU ranks"}));
  EXPECT_FALSE(fs::exists(out));
}

TEST(ReproduceCli, SimulateWritesOneRowPerPaperPointAndResumes) {
  TempDir dir;
  const std::string out = dir.file("results");
  const CliResult r = run_ptdp(dir, {"reproduce", "fig12", "--out", out});  // --out is created
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = out + "/fig12.csv";
  auto rows = rows_of(csv);
  ASSERT_EQ(rows.size(), 10u);
  std::set<std::string> keys;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("experiment"), "fig12");
    EXPECT_EQ(row.at("mode"), "simulate");
    EXPECT_EQ(row.at("backend"), "a100-selene");
    EXPECT_EQ(row.at("gpus"), "96");
    EXPECT_GT(std::stod(row.at("tflops_per_gpu")), 50);
    keys.insert(key_of(row));
  }
  EXPECT_EQ(keys.size(), 10u);
  EXPECT_NE(r.out.find("[fig12 10/10]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ETA"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fig12: mean absolute error"), std::string::npos) << r.out;

  const CliResult again = run_ptdp(dir, {"reproduce", "fig12", "--out", out});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(count(again.out, "skipped"), 10u) << again.out;
  EXPECT_EQ(rows_of(csv).size(), 10u);

  const CliResult forced = run_ptdp(dir, {"reproduce", "fig12", "--out", out, "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(count(forced.out, "skipped"), 0u) << forced.out;
  rows = rows_of(csv);
  EXPECT_EQ(rows.size(), 10u) << "--force replaces rows, it does not add duplicates";

  // Another profile is another configuration: its rows are added beside the A100 ones.
  const CliResult h100 = run_ptdp(dir, {"reproduce", "fig12", "--out", out, "--hardware", "h100-dgx"});
  ASSERT_EQ(h100.exit_code, 0) << h100.err;
  EXPECT_EQ(rows_of(csv).size(), 20u);
}

TEST(ReproduceCli, AnalyticFiguresComputeThePapersFormulas) {
  TempDir dir;
  ASSERT_EQ(run_ptdp(dir, {"reproduce", "fig6", "--out", dir.file("")}).exit_code, 0);
  const auto rows = rows_of(dir.file("fig6.csv"));
  ASSERT_EQ(rows.size(), 26u);
  for (const auto& r : rows) {  // (p - 1)/m = (n - d)/b'
    const double n = std::stod(r.at("gpus")), d = std::stod(r.at("dp")), bp = std::stod(r.at("global_batch"));
    EXPECT_NEAR(std::stod(r.at("bubble_fraction")), (n - d) / bp, 1e-5);
    EXPECT_EQ(r.at("backend"), "analytic");
  }
  const CliResult fig8 = run_ptdp(dir, {"reproduce", "fig8", "--out", dir.file("")});
  ASSERT_EQ(fig8.exit_code, 0) << fig8.err;
  std::map<std::string, double> seq;  // "B/b" -> sequences/s by Eq. (1)
  for (const auto& r : rows_of(dir.file("fig8.csv"))) {
    EXPECT_EQ(r.at("tp"), "8");
    EXPECT_EQ(r.at("pp"), "8");
    seq[r.at("global_batch") + "/" + r.at("micro_batch")] = std::stod(r.at("seq_per_s"));
  }
  ASSERT_EQ(seq.size(), 10u);
  // The paper: the best micro-batch size is 4 for B = 512 and the estimate falls by b = 16.
  EXPECT_GT(seq["512/4"], seq["512/1"]);
  EXPECT_LT(seq["128/16"], seq["128/1"]);
}

// Table 2 and Figure 10 (PTD-P against ZeRO-3): the performance model within 10% of the paper on
// every row, the 530B ZeRO-3 run with micro-batch 4 on 640 GPUs included (it fits the memory model
// of an 80 GB A100, as it ran; docs/REPRODUCE.md); the days for 300B tokens.
TEST(ReproduceCli, Table2ComparesPtdpWithZero3WithinTenPercent) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", "table2", "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Paper values by (model, GPUs, t): Table 2.
  const std::map<std::string, double> paper = {
      {"gpt3-175b/384/1", 144},  {"gpt3-175b/768/1", 88},   {"gpt3-175b/1536/1", 44},  {"gpt-530b/640/1", 138},
      {"gpt-530b/1120/1", 98},
      {"gpt-530b/2240/1", 48},   {"gpt3-175b/384/8", 153},  {"gpt3-175b/768/8", 149},  {"gpt3-175b/1536/8", 141},
      {"gpt-530b/560/8", 171},   {"gpt-530b/1120/8", 167},  {"gpt-530b/2240/8", 159}};
  const auto rows = rows_of(dir.file("table2.csv"));
  ASSERT_EQ(rows.size(), 12u);
  std::set<std::string> seen;
  for (const auto& row : rows) {
    const std::string k = row.at("model") + "/" + row.at("gpus") + "/" + row.at("tp");
    ASSERT_TRUE(paper.count(k)) << k;
    seen.insert(k);
    EXPECT_NEAR(std::stod(row.at("tflops_per_gpu")), paper.at(k), 0.1 * paper.at(k)) << k;
    EXPECT_EQ(row.at("experiment"), "table2");
    EXPECT_EQ(row.at("mode"), "simulate");
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(r.out.find("no row: out of memory"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "days for 300B tokens (Eq. 4)"), 12u) << r.out;
  EXPECT_NE(r.out.find("table2: mean absolute error"), std::string::npos) << r.out;
}

TEST(ReproduceCli, Fig10IsTable2AtThePapersPlottedPositions) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", "fig10", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 13u);
  const auto header = split_csv_line(lines[0]);
  std::map<std::string, std::map<std::string, std::string>> by_point;  // "series|x" -> config
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    ASSERT_EQ(f.size(), header.size());
    std::map<std::string, std::string> c;
    for (size_t k = 0; k < f.size(); ++k) c[header[k]] = f[k];
    by_point[c.at("series") + "|" + c.at("x")] = c;
  }
  // Every plotted point of the paper is there (results/paper/figures.csv, fig10).
  for (const char* series : {"ZeRO-3, 175B", "PTD-P, 175B"})
    for (const char* x : {"384", "768", "1536"}) EXPECT_TRUE(by_point.count(std::string(series) + "|" + x)) << series << x;
  for (const char* series : {"ZeRO-3, 530B", "PTD-P, 530B"})
    for (const char* x : {"560", "1120", "2240"}) EXPECT_TRUE(by_point.count(std::string(series) + "|" + x)) << series << x;
  // The paper plots 530B ZeRO-3's first point at 560; the run used 640 GPUs and B = 2560.
  const auto& first = by_point.at("ZeRO-3, 530B|560");
  EXPECT_EQ(first.at("gpus"), "640");
  EXPECT_EQ(first.at("global_batch"), "2560");
  EXPECT_EQ(first.at("micro_batch"), "4");
  for (const auto& [k, c] : by_point) {
    const bool zero = k.rfind("ZeRO-3", 0) == 0;
    EXPECT_EQ(c.at("zero"), zero ? "3" : "0") << k;
    if (zero) {
      EXPECT_EQ(c.at("tp") + "/" + c.at("pp"), "1/1") << k;
      EXPECT_EQ(c.at("num_microbatches"), "1") << k;  // one micro-batch of B/d per GPU
    } else {
      EXPECT_EQ(std::stoi(c.at("tp")) * std::stoi(c.at("pp")), c.at("model") == "gpt-530b" ? 280 : 96) << k;
      EXPECT_EQ(c.at("micro_batch"), "1") << k;
    }
  }
  // Measured at small scale on CPU ranks: ZeRO-3 and PTD-P both train (every configuration a row).
  const CliResult run = run_ptdp(dir, {"reproduce", "fig10", "--mode", "run", "--scale", "small", "--out",
                                       dir.file("out")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> rows = testing::lines_of(testing::text_of(dir.file("out/fig10.csv")));
  EXPECT_EQ(rows.size(), 1 + by_point.size());
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_NE(rows[i].find(",run,"), std::string::npos) << rows[i];
}

TEST(ReproduceCli, PerPointSeriesSettingsAndZeroAreChecked) {
  TempDir dir;
  auto spec = [&](const std::string& extra) {
    const std::string path = dir.file("z.toml");
    std::ofstream(path) << "name = \"z\"\ntitle = \"t\"\nmetric = \"tflops_per_gpu\"\npaper = \"none\"\n[base]\n"
                           "model = \"tiny\"\nprecision = \"f32\"\n[[points]]\nx = \"2\"\nglobal_batch = 8\n"
                           "[[points]]\nx = \"4\"\nglobal_batch = 8\n[[series]]\nname = \"s\"\n"
                        << extra;
    return run_ptdp(dir, {"reproduce", path, "--dry-run"});
  };
  const CliResult good = spec("zero = 1\nat.\"2\" = { dp = 2 }\nat.\"4\" = { dp = 4, micro_batch = 2 }\n");
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find(",2,1,1,2,1,1,8,4,1f1b,"), std::string::npos) << good.out;  // gpus 2 ... B 8, m 4
  EXPECT_NE(good.out.find(",4,1,1,4,1,2,8,1,1f1b,"), std::string::npos) << good.out;
  EXPECT_TRUE(IsUsageError(spec("at.\"3\" = { dp = 2 }\n"), {"z.toml", "'at' names x '3'"}));
  EXPECT_TRUE(IsUsageError(spec("zero = 4\n"), {"z.toml", "'zero' = 4 must be 0, 1, 2 or 3"}));
  EXPECT_TRUE(IsUsageError(spec("at = 3\n"), {"z.toml", "'at' must be a table"}));
}

// One rank runs two OpenMP threads on this 2-core machine; when other work shares the cores,
// GNU OpenMP's spinning barriers make it 10x slower. The tests' children wait passively.
void passive_openmp() { ::setenv("OMP_WAIT_POLICY", "passive", 0); }

// Fig. 8 at small scale: t_f(b) and t_b(b) measured by training the small model on one CPU rank
// (once per micro-batch size), then Eq. (1) for both batch sizes.
TEST(ReproduceCli, RunAtSmallScaleTrainsForRealAndRecordsLossAndTime) {
  passive_openmp();
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", "fig8", "--mode", "run", "--scale", "small", "--out",
                                     dir.file("")}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto rows = rows_of(dir.file("fig8.csv"));
  ASSERT_EQ(rows.size(), 10u);
  std::map<std::string, std::string> loss_of_b;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("mode"), "run");
    EXPECT_EQ(row.at("backend"), "cpu");
    EXPECT_EQ(row.at("model"), "fig7-1b-small");
    EXPECT_EQ(row.at("vocab_size"), "256");
    EXPECT_EQ(row.at("pp"), "8");
    EXPECT_NEAR(std::stod(row.at("loss")), std::log(256.0), 0.5);  // a real loss, near ln V at the start
    EXPECT_GT(std::stod(row.at("iter_time_ms")), 0);
    EXPECT_GT(std::stod(row.at("fwd_ms")), 0);
    EXPECT_GT(std::stod(row.at("bwd_ms")), 0);
    // One measurement per micro-batch size serves both batch sizes.
    auto [it, fresh] = loss_of_b.emplace(row.at("micro_batch"), row.at("loss"));
    if (!fresh) {
      EXPECT_EQ(it->second, row.at("loss"));
    }
  }
  EXPECT_EQ(loss_of_b.size(), 5u);
}

// Every spec in experiments/specs is named by `reproduce --help` and by the unknown-name error.
TEST(ReproduceCli, TheHelpAndTheUnknownNameErrorListEveryArtefact) {
  TempDir dir;
  const CliResult help = run_ptdp(dir, {"reproduce", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  const CliResult unknown = run_ptdp(dir, {"reproduce", "fig99", "--out", dir.file("out")});
  ASSERT_TRUE(IsUsageError(unknown, {"'fig99' is not an artefact"}));
  size_t specs = 0;
  for (const auto& e : fs::directory_iterator(testing::source_file("experiments/specs"))) {
    if (e.path().extension() != ".toml") continue;
    ++specs;
    const std::string name = e.path().stem().string();
    EXPECT_NE(help.out.find(" " + name + ","), std::string::npos) << name << " in " << help.out;
    EXPECT_NE(unknown.err.find(" " + name + ","), std::string::npos) << name << " in " << unknown.err;
  }
  EXPECT_GE(specs, 20u);
}

TEST(ReproduceCli, BadInputIsOneLineAndWritesNothing) {
  TempDir dir;
  const std::string out = dir.file("out");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{"reproduce", "fig99", "--out", out}, {"'fig99' is not an artefact", "fig13"}},
      {{"reproduce", "fig13", "--mode", "fast", "--out", out}, {"--mode 'fast'"}},
      {{"reproduce", "fig13", "--scale", "huge", "--out", out}, {"--scale 'huge'"}},
      {{"reproduce", "fig13", "--mode", "run", "--out", out}, {"--mode run --scale paper", "64 GPU ranks", "mpirun"}},
      {{"reproduce", "all", "--mode", "run", "--out", out}, {"--mode run --scale paper", "1 to 6144"}},
      {{"reproduce", "fig13", "--mode", "run", "--scale", "small", "--hardware", "h100-dgx", "--out", out},
       {"--hardware h100-dgx is for --mode simulate"}},
      {{"reproduce", "fig13", "--hardware", "tpu-v9", "--out", out}, {"--hardware 'tpu-v9'"}},
  };
  for (const auto& c : cases) {
    const CliResult r = run_ptdp(dir, c.args);
    EXPECT_TRUE(IsUsageError(r, c.needles)) << c.args[1];
    EXPECT_FALSE(fs::exists(out)) << "nothing may be written on bad input";
  }
  // A result file with another header is refused before any configuration runs.
  fs::create_directories(out);
  std::ofstream(out + "/fig13.csv") << "a,b\n1,2\n";
  const CliResult r = run_ptdp(dir, {"reproduce", "fig13", "--out", out});
  EXPECT_TRUE(IsUsageError(r, {"--out", "fig13.csv", "header"}));
  EXPECT_EQ(text_of(out + "/fig13.csv"), "a,b\n1,2\n");
}

// Figure 7 runs on one GPU here: refused before anything is written where there is none. The
// GPUs of this machine (real, or the virtual GPU build's) are hidden from the child.
TEST(ReproduceCli, Fig7RunWithoutAGpuIsRefusedBeforeWriting) {
  TempDir dir;
  const std::string out = dir.file("out");
  const testing::ScopedEnv no_cuda("CUDA_VISIBLE_DEVICES", ""), no_vgpu("VGPU_DEVICES", "0");
  const CliResult r = run_ptdp(dir, {"reproduce", "fig7", "--mode", "run", "--out", out});
  EXPECT_TRUE(IsUsageError(r, {"fig7.toml", "--backend cuda: "}));
  EXPECT_FALSE(fs::exists(out)) << "nothing may be written on bad input";
}

// Fig. 8 at paper scale is one rank's measurement on one GPU: refused here for want of one (it
// asked for a launcher, under which it then refused to run).
TEST(ReproduceCli, Fig8RunAtPaperScaleNeedsOneGpuNotALauncher) {
  TempDir dir;
  const std::string out = dir.file("out");
  const testing::ScopedEnv no_cuda("CUDA_VISIBLE_DEVICES", ""), no_vgpu("VGPU_DEVICES", "0");
  const CliResult r = run_ptdp(dir, {"reproduce", "fig8", "--mode", "run", "--out", out});
  EXPECT_TRUE(IsUsageError(r, {"fig8.toml", "--backend cuda: "}));
  EXPECT_EQ(r.err.find("mpirun"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// The summary of a run on CPU ranks says "per CPU rank", and a spec of one series prints no
// series name (its placeholder "(single series)" only pairs rows with the paper's points).
TEST(ReproduceCli, ASmallScaleSummaryNamesCpuRanksAndNoPlaceholderSeries) {
  passive_openmp();
  TempDir dir;
  const std::string path = dir.file("one.toml");
  std::ofstream(path) << "name = \"one\"\ntitle = \"t\"\nmetric = \"tflops_per_gpu\"\npaper = \"none\"\n[base]\n"
                         "model = \"tiny\"\nprecision = \"f32\"\nmicro_batch = 1\niters = 2\nwarmup = 1\n"
                         "[[series]]\nname = \"(single series)\"\n[[points]]\nx = \"1\"\nglobal_batch = 1\n"
                         "[[points]]\nx = \"2\"\nglobal_batch = 2\n";
  const CliResult r = run_ptdp(dir, {"reproduce", path, "--mode", "run", "--scale", "small", "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("one: TFLOP/s per CPU rank (run, small scale)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[one 1/2] x 1: t=1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("per GPU"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(single series)"), std::string::npos) << r.out;
}

// A sweep of six tiny configurations, each training for a fraction of a second.
// A sweep of six tiny training runs on two data-parallel ranks, each a fraction of a second.
const char* kSlowSweep = R"(name = "slow"
title = "six tiny training runs"
metric = "tflops_per_gpu"
paper = "none"
[base]
model = "tiny"
precision = "f32"
micro_batch = 1
dp = 2
iters = 10
warmup = 1
[[series]]
name = "B"
[[points]]
x = "1"
global_batch = 2
[[points]]
x = "2"
global_batch = 4
[[points]]
x = "3"
global_batch = 6
[[points]]
x = "4"
global_batch = 8
[[points]]
x = "5"
global_batch = 10
[[points]]
x = "6"
global_batch = 12
)";

// Starts `ptdp ARGS` in the background, its output going to files in `dir`.
pid_t spawn_ptdp(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {PTDP_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const std::string out_path = dir.file("bg.stdout"), err_path = dir.file("bg.stderr");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::alarm(120);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

TEST(ReproduceCli, SigintKeepsEveryCompletedRowAndARerunCompletesTheSweep) {
  passive_openmp();
  TempDir dir;
  const std::string spec = dir.file("slow.toml");
  std::ofstream(spec) << kSlowSweep;
  const std::string out = dir.file("out");
  const std::vector<std::string> args = {"reproduce", spec, "--mode", "run", "--scale", "small", "--out", out};
  const std::string csv = out + "/slow.csv";

  const pid_t pid = spawn_ptdp(dir, args);
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  while (rows_of(csv).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(rows_of(csv).empty()) << "no row within 100 s";
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_NE(text_of(dir.file("bg.stderr")).find("interrupted"), std::string::npos) << text_of(dir.file("bg.stderr"));

  const auto kept = rows_of(csv);  // every row whole (rows_of checks the field count)
  ASSERT_GE(kept.size(), 1u);
  ASSERT_LT(kept.size(), 6u) << "the sweep finished before the signal: the test proves nothing";
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string(), "slow.csv") << "a temporary file was left behind";

  const CliResult rerun = run_ptdp(dir, args, 300);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_EQ(count(rerun.out, "skipped"), kept.size()) << rerun.out;
  const auto all = rows_of(csv);
  ASSERT_EQ(all.size(), 6u);
  std::set<std::string> keys, batches;
  for (const auto& r : all) {
    keys.insert(key_of(r));
    batches.insert(r.at("global_batch"));
    EXPECT_EQ(r.at("mode"), "run");
    EXPECT_FALSE(r.at("loss").empty());
  }
  EXPECT_EQ(keys.size(), 6u) << "no configuration twice";
  EXPECT_EQ(batches, (std::set<std::string>{"2", "4", "6", "8", "10", "12"}));
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(all[i].at("timestamp"), kept[i].at("timestamp"));
}

// ---- plots/figures.py -----------------------------------------------------------------------------

// The Python that has matplotlib (Debian's), else whatever python3 is on the PATH.
std::string python() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

CliResult run_python(const TempDir& dir, const std::vector<std::string>& args) {
  std::string cmd = python() + " " + testing::source_file("plots/figures.py");
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >" + dir.file("py.stdout") + " 2>" + dir.file("py.stderr");
  const int st = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = text_of(dir.file("py.stdout"));
  r.err = text_of(dir.file("py.stderr"));
  return r;
}

bool one_line(const std::string& s) { return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1; }

TEST(PlotScript, RefusesAMalformedCsvWithOneLineNamingTheFileAndTheProblem) {
  TempDir dir;
  ASSERT_EQ(run_ptdp(dir, {"reproduce", "fig12", "--out", dir.file("")}).exit_code, 0);
  const std::string good = text_of(dir.file("fig12.csv"));
  const auto lines = lines_of(good);
  const std::string header = lines[0];
  std::string short_row = lines[2];
  short_row = short_row.substr(0, short_row.rfind(','));  // one field missing
  struct Case {
    std::string text;
    std::vector<std::string> needles;
  };
  auto replace_field = [&](const std::string& line, const std::string& column, const std::string& value) {
    auto h = split_csv_line(header), f = split_csv_line(line);
    std::string out;
    for (size_t i = 0; i < h.size(); ++i) out += (i ? "," : "") + (h[i] == column ? value : f[i]);
    return out;
  };
  const std::vector<Case> cases = {
      {header + "\n" + lines[1] + "\n" + short_row + "\n", {"fig12.csv:3:", "fields, the header has"}},
      {header + "\n" + replace_field(lines[1], "tflops_per_gpu", "fast") + "\n",
       {"fig12.csv:2:", "column 'tflops_per_gpu': 'fast' is not a number"}},
      {header + "\n" + replace_field(lines[1], "tp", "8.5") + "\n", {"fig12.csv:2:", "'tp'", "not an integer"}},
      {"experiment,mode\nfig12,simulate\n", {"fig12.csv:1:", "no column 'backend'"}},
      {"", {"fig12.csv:1:", "empty"}},
  };
  for (const auto& c : cases) {
    std::ofstream(dir.file("fig12.csv")) << c.text;
    const CliResult r = run_python(dir, {"fig12", "--results", dir.file(""), "--out", dir.file("")});
    EXPECT_EQ(r.exit_code, 2) << c.text << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_EQ(r.err.rfind("plots: error: ", 0), 0u) << r.err;
    for (const auto& n : c.needles) EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
    EXPECT_FALSE(fs::exists(dir.file("fig12.png"))) << "nothing is drawn from a malformed file";
  }
  std::filesystem::remove(dir.file("fig12.csv"));
  const CliResult missing = run_python(dir, {"fig12", "--results", dir.file(""), "--out", dir.file("")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(one_line(missing.err)) << missing.err;
  EXPECT_NE(missing.err.find("fig12.csv: no such file"), std::string::npos) << missing.err;
}

TEST(PlotScript, DrawsTheFigureWithThePapersPoints) {
  if (std::system((python() + " -c 'import matplotlib' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << python() << " has no matplotlib";
  TempDir dir;
  ASSERT_EQ(run_ptdp(dir, {"reproduce", "fig18", "--out", dir.file("")}).exit_code, 0);
  const CliResult r = run_python(dir, {"fig18", "--results", dir.file(""), "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(fs::file_size(dir.file("fig18.png")), 10000u);
  EXPECT_NE(r.out.find("| fig18 | 10 |"), std::string::npos) << r.out;  // every paper point compared
}

// kor22-table5 (a100-selene) and mcore-h100 (h100-dgx) drawn together: each from its own profile's
// rows, their published values read from results/paper/NAME.csv, both in the summary and its table.
TEST(PlotScript, DrawsKorthikantiTable5AndMegatronCoreH100EachFromItsOwnProfile) {
  if (std::system((python() + " -c 'import matplotlib' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << python() << " has no matplotlib";
  TempDir dir;
  ASSERT_EQ(run_ptdp(dir, {"reproduce", "kor22-table5", "--out", dir.file("")}).exit_code, 0);
  ASSERT_EQ(run_ptdp(dir, {"reproduce", "mcore-h100", "--out", dir.file("")}).exit_code, 0);
  const CliResult r = run_python(dir, {"kor22-table5", "mcore-h100", "--results", dir.file(""), "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* png : {"kor22-table5.png", "mcore-h100.png", "summary.png"})
    EXPECT_GT(fs::file_size(dir.file(png)), 10000u) << png;
  // Every published point compared: Table 5's two series on four models, the nine H100 sizes.
  EXPECT_NE(r.out.find("| kor22-table5 | 10 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| mcore-h100 | 9 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("no simulated value"), std::string::npos) << r.err;
  // --hardware names one profile for all: the H100 rows are not a100-selene's, so none is compared.
  const CliResult a100 = run_python(dir, {"mcore-h100", "--hardware", "a100-selene", "--results", dir.file(""),
                                          "--out", dir.file("")});
  ASSERT_EQ(a100.exit_code, 0) << a100.err;
  EXPECT_NE(a100.out.find("| mcore-h100 | 0 |"), std::string::npos) << a100.out;
}

}  // namespace
}  // namespace ptdp
