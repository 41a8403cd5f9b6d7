// The experiment specs (experiments/specs/*.toml) against the paper's data: every spec expands
// (`ptdp reproduce NAME --dry-run`) to exactly the configurations of the paper's figure or table —
// the same points, counted and valued against results/paper/figures.csv and table1.csv — and to
// the configurations the simulator's figure-shape tests use (sim::figure_point). The small scale
// keeps every layout. Bad specs are refused with one line naming the file and the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <atomic>
#include <thread>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "core/results/csv_reader.h"
#include "core/config/results_csv.h"
#include "core/sim/paper_setups.h"
#include "experiments/sweep.h"
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
using testing::TempDir;


// One expanded configuration, as `--dry-run` prints it: column -> text.
using Config = std::map<std::string, std::string>;

std::vector<Config> dry_run(const std::string& name, const std::string& scale = "paper") {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", name, "--dry-run", "--scale", scale});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  std::vector<Config> out;
  if (lines.empty()) return out;
  const auto header = split_csv_line(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    EXPECT_EQ(f.size(), header.size()) << lines[i];
    Config c;
    for (size_t k = 0; k < header.size() && k < f.size(); ++k) c[header[k]] = f[k];
    out.push_back(c);
  }
  return out;
}

int num(const Config& c, const std::string& k) { return std::stoi(c.at(k)); }

struct PaperPoint {
  std::string series, x;
};
std::vector<PaperPoint> paper_points(const std::string& figure) {
  const CsvTable t = CsvTable::read(testing::source_file("results/paper/figures.csv"), {"figure", "series", "x"});
  std::vector<PaperPoint> v;
  for (size_t i = 0; i < t.size(); ++i)
    if (t.text(i, "figure") == figure) v.push_back({t.text(i, "series"), t.text(i, "x")});
  return v;
}

// "Batch size = 128" -> 128; "(8, 8)" -> {8, 8}.
int batch_of(const std::string& series) {
  int b = 0;
  EXPECT_EQ(std::sscanf(series.c_str(), "Batch size = %d", &b), 1) << series;
  return b;
}
std::pair<int, int> pair_of(const std::string& x) {
  int a = 0, b = 0;
  EXPECT_EQ(std::sscanf(x.c_str(), "(%d, %d)", &a, &b), 2) << x;
  return {a, b};
}

// The spec's points are exactly the paper's: same count, same (series, x) pairs, each once.
std::map<std::pair<std::string, std::string>, Config> same_points_as_paper(const std::string& figure) {
  const auto cfgs = dry_run(figure);
  const auto paper = paper_points(figure);
  EXPECT_FALSE(paper.empty());
  EXPECT_EQ(cfgs.size(), paper.size()) << figure;
  std::map<std::pair<std::string, std::string>, Config> by_point;
  for (const auto& c : cfgs) {
    EXPECT_EQ(c.at("experiment"), figure);
    EXPECT_TRUE(by_point.emplace(std::make_pair(c.at("series"), c.at("x")), c).second)
        << figure << ": " << c.at("series") << " / " << c.at("x") << " twice";
  }
  for (const auto& p : paper)
    EXPECT_TRUE(by_point.count({p.series, p.x})) << figure << ": the paper's point " << p.series << " / " << p.x
                                                 << " is not in the spec";
  return by_point;
}

// Every point: the paper's common settings (section 4 of the paper notes): s = 2048, V = 51200,
// fp16, full recomputation unless the figure varies it.
void expect_paper_defaults(const Config& c, bool recompute_varies = false) {
  EXPECT_EQ(c.at("seq_length"), "2048");
  EXPECT_EQ(c.at("vocab_size"), "51200");
  EXPECT_EQ(c.at("precision"), "f16");
  if (!recompute_varies) {
    EXPECT_EQ(c.at("recompute"), "full");
  }
  EXPECT_EQ(num(c, "gpus"), num(c, "tp") * num(c, "pp") * num(c, "dp"));
  EXPECT_EQ(num(c, "num_microbatches"), num(c, "global_batch") / (num(c, "micro_batch") * num(c, "dp")));
}

void expect_model(const Config& c, int layers, int hidden, int heads) {
  EXPECT_EQ(num(c, "layers"), layers);
  EXPECT_EQ(num(c, "hidden"), hidden);
  EXPECT_EQ(num(c, "heads"), heads);
}

TEST(SweepSpecs, Table1ExpandsToTheTenRowsOfTable1) {
  const auto cfgs = dry_run("table1");
  const CsvTable t = CsvTable::read(testing::source_file("results/paper/table1.csv"),
                                    {"params_b", "heads", "hidden", "layers", "tp", "pp", "gpus", "global_batch",
                                     "micro_batch", "dp", "num_microbatches", "vpp"});
  ASSERT_EQ(t.size(), 10u);
  ASSERT_EQ(cfgs.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const Config& c = cfgs[i];
    SCOPED_TRACE(c.at("x"));
    EXPECT_EQ(c.at("x"), t.text(i, "params_b"));
    for (const char* k : {"heads", "hidden", "layers", "tp", "pp", "gpus", "global_batch", "micro_batch", "dp",
                          "num_microbatches", "vpp"})
      EXPECT_EQ(c.at(k), t.text(i, k)) << k;
    EXPECT_EQ(c.at("schedule"), num(c, "vpp") > 1 ? "interleaved" : "1f1b");
    EXPECT_EQ(c.at("scatter_gather"), "1");
    expect_paper_defaults(c);
  }
}

TEST(SweepSpecs, Fig6IsTheBubbleOfEachSeriesNAndBPrimeOverD) {
  const auto pts = same_points_as_paper("fig6");
  for (const auto& [key, c] : pts) {
    int n = 0, bp = 0;
    ASSERT_EQ(std::sscanf(key.first.c_str(), "n=%d, b'=%d", &n, &bp), 2) << key.first;
    EXPECT_EQ(c.at("kind"), "bubble");
    EXPECT_EQ(num(c, "gpus"), n);
    EXPECT_EQ(num(c, "global_batch"), bp);
    EXPECT_EQ(num(c, "micro_batch"), 1);
    EXPECT_EQ(num(c, "tp"), 1);
    EXPECT_EQ(num(c, "dp"), std::stoi(key.second));
    EXPECT_EQ(num(c, "pp"), n / num(c, "dp"));
  }
}

TEST(SweepSpecs, Fig7And8AreTheOneBillionModelOverMicroBatchSizes) {
  for (const char* fig : {"fig7", "fig8"}) {
    const auto pts = same_points_as_paper(fig);
    for (const auto& [key, c] : pts) {
      SCOPED_TRACE(std::string(fig) + " " + key.first + " " + key.second);
      expect_model(c, 4, 4096, 128);
      expect_paper_defaults(c);
      EXPECT_EQ(c.at("micro_batch"), key.second);
      EXPECT_EQ(num(c, "dp"), 1);
      if (std::string(fig) == "fig7") {
        EXPECT_EQ(num(c, "tp"), 1);
        EXPECT_EQ(num(c, "pp"), 1);
      } else {  // (p, t) = (8, 8), Eq. (1)
        EXPECT_EQ(c.at("kind"), "eq1");
        EXPECT_EQ(num(c, "tp"), 8);
        EXPECT_EQ(num(c, "pp"), 8);
        EXPECT_EQ(num(c, "global_batch"), batch_of(key.first));
      }
    }
  }
}

TEST(SweepSpecs, Figures11To18HaveThePapersSettings) {
  for (const auto& [key, c] : same_points_as_paper("fig11")) {
    const int p = std::stoi(key.second);
    expect_model(c, 3 * p, 20480, 128);
    EXPECT_EQ(num(c, "pp"), p);
    EXPECT_EQ(num(c, "tp"), 8);
    EXPECT_EQ(num(c, "dp"), 1);
    EXPECT_EQ(num(c, "micro_batch"), 1);
    EXPECT_EQ(num(c, "global_batch"), batch_of(key.first));
    EXPECT_EQ(c.at("schedule"), "1f1b");
    expect_paper_defaults(c);
  }
  for (const char* fig : {"fig12", "fig18"}) {
    for (const auto& [key, c] : same_points_as_paper(fig)) {
      expect_model(c, 96, 12288, 96);
      EXPECT_EQ(num(c, "tp"), 8);
      EXPECT_EQ(num(c, "pp"), 12);
      EXPECT_EQ(num(c, "dp"), 1);
      EXPECT_EQ(num(c, "micro_batch"), 1);
      EXPECT_EQ(c.at("global_batch"), key.second);
      const bool interleaved = key.first != "Non-interleaved";
      EXPECT_EQ(c.at("schedule"), interleaved ? "interleaved" : "1f1b");
      EXPECT_EQ(num(c, "vpp"), interleaved ? 4 : 1);
      EXPECT_EQ(c.at("scatter_gather"), key.first == "Unoptimized" ? "0" : "1");
      expect_paper_defaults(c);
    }
  }
  for (const auto& [key, c] : same_points_as_paper("fig13")) {
    const auto [p, t] = pair_of(key.second);
    expect_model(c, 32, 20480, 128);
    EXPECT_EQ(num(c, "pp"), p);
    EXPECT_EQ(num(c, "tp"), t);
    EXPECT_EQ(num(c, "gpus"), 64);
    EXPECT_EQ(num(c, "micro_batch"), 1);
    EXPECT_EQ(num(c, "global_batch"), batch_of(key.first));
    expect_paper_defaults(c);
  }
  for (const char* fig : {"fig14", "fig15"}) {
    for (const auto& [key, c] : same_points_as_paper(fig)) {
      const auto [a, d] = pair_of(key.second);
      expect_model(c, 32, 3840, 32);
      EXPECT_EQ(num(c, std::string(fig) == "fig14" ? "pp" : "tp"), a);
      EXPECT_EQ(num(c, std::string(fig) == "fig14" ? "tp" : "pp"), 1);
      EXPECT_EQ(num(c, "dp"), d);
      EXPECT_EQ(num(c, "gpus"), 64);
      EXPECT_EQ(num(c, "micro_batch"), 1);
      EXPECT_EQ(num(c, "global_batch"), batch_of(key.first));
      expect_paper_defaults(c);
    }
  }
  for (const auto& [key, c] : same_points_as_paper("fig16")) {
    expect_model(c, 32, 15360, 128);
    EXPECT_EQ(num(c, "tp"), 8);
    EXPECT_EQ(num(c, "pp"), 8);
    EXPECT_EQ(num(c, "dp"), 1);
    EXPECT_EQ(c.at("micro_batch"), key.second);
    EXPECT_EQ(num(c, "global_batch"), batch_of(key.first));
    expect_paper_defaults(c);
  }
  for (const auto& [key, c] : same_points_as_paper("fig17")) {
    expect_model(c, 80, 12288, 96);
    EXPECT_EQ(num(c, "tp"), 8);
    EXPECT_EQ(num(c, "pp"), 16);
    EXPECT_EQ(num(c, "dp"), 1);
    EXPECT_EQ(num(c, "micro_batch"), 1);
    EXPECT_EQ(c.at("global_batch"), key.second);
    EXPECT_EQ(c.at("recompute"), key.first == "Act. recomputation" ? "full" : "none");
    expect_paper_defaults(c, true);
  }
}

// The simulator's figure-shape tests (core/sim/figures_test.cpp) use sim::figure_point; the specs
// are what the drivers run. Both must describe the same configuration of every point.
TEST(SweepSpecs, AgreeWithTheSimulatorsPaperSetups) {
  for (const char* fig : {"fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "fig17", "fig18"}) {
    for (const auto& c : dry_run(fig)) {
      SCOPED_TRACE(std::string(fig) + " " + c.at("series") + " " + c.at("x"));
      const RunConfig s = sim::figure_point(fig, c.at("series"), c.at("x")).cfg;
      EXPECT_EQ(num(c, "layers"), s.model.layers);
      EXPECT_EQ(num(c, "hidden"), s.model.hidden);
      EXPECT_EQ(num(c, "heads"), s.model.heads);
      EXPECT_EQ(num(c, "seq_length"), s.model.seq_length);
      EXPECT_EQ(std::stoll(c.at("vocab_size")), s.model.vocab_size);
      EXPECT_EQ(num(c, "tp"), s.par.tp);
      EXPECT_EQ(num(c, "pp"), s.par.pp);
      EXPECT_EQ(num(c, "dp"), s.par.dp);
      EXPECT_EQ(num(c, "vpp"), s.par.vpp);
      EXPECT_EQ(num(c, "micro_batch"), s.par.micro_batch);
      EXPECT_EQ(num(c, "global_batch"), s.par.global_batch);
      EXPECT_EQ(c.at("schedule"), enum_name(s.par.schedule));
      EXPECT_EQ(c.at("recompute"), enum_name(s.par.recompute));
      EXPECT_EQ(c.at("scatter_gather"), s.par.scatter_gather ? "1" : "0");
      EXPECT_EQ(c.at("precision"), enum_name(s.precision));
    }
  }
}

// --scale small: the same points and the same layouts (t, p, d, v, b, B, schedule, recompute,
// scatter/gather) with small models (V = 256) wherever the paper's GPU count fits here; Table 1
// (32 ... 3072 GPUs) is relaid, and says so in its spec.
TEST(SweepSpecs, SmallScaleKeepsThePapersLayoutsWithSmallModels) {
  for (const char* fig : {"fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "fig17", "fig18", "fig7", "fig8"}) {
    const auto paper = dry_run(fig), small = dry_run(fig, "small");
    ASSERT_EQ(paper.size(), small.size()) << fig;
    for (size_t i = 0; i < paper.size(); ++i) {
      const Config &p = paper[i], &s = small[i];
      SCOPED_TRACE(std::string(fig) + " " + p.at("series") + " " + p.at("x"));
      EXPECT_EQ(p.at("series"), s.at("series"));
      EXPECT_EQ(p.at("x"), s.at("x"));
      std::vector<std::string> same = {"pp", "dp", "vpp", "micro_batch", "global_batch", "num_microbatches",
                                       "schedule", "recompute", "scatter_gather"};
      if (std::string(fig) != "fig8") same.push_back("tp");  // fig8 is measured on one rank (t = 1)
      for (const auto& k : same) EXPECT_EQ(p.at(k), s.at(k)) << k;
      EXPECT_EQ(s.at("vocab_size"), "256");
      EXPECT_LE(num(s, "hidden"), 128);
      EXPECT_LE(num(s, "seq_length"), 64);
      EXPECT_LE(num(s, "gpus"), 128);
      EXPECT_EQ(s.at("model"), p.at("model") + "-small");
    }
  }
  const auto t1 = dry_run("table1", "small");
  ASSERT_EQ(t1.size(), 10u);
  std::set<std::string> layouts;
  for (const auto& c : t1) {
    EXPECT_LE(num(c, "gpus"), 64);
    EXPECT_EQ(c.at("vocab_size"), "256");
    layouts.insert(c.at("tp") + "/" + c.at("pp") + "/" + c.at("vpp") + "/" + c.at("micro_batch"));
  }
  EXPECT_GE(layouts.size(), 9u) << "the small Table 1 rows must not collapse onto each other";
}

TEST(SweepSpecs, AllExpandsEveryArtefactInThePapersOrder) {
  const auto cfgs = dry_run("all");
  std::vector<std::string> order;
  for (const auto& c : cfgs)
    if (order.empty() || order.back() != c.at("experiment")) order.push_back(c.at("experiment"));
  EXPECT_EQ(order, (std::vector<std::string>{"table1", "table2", "fig6", "fig7", "fig8", "fig10", "fig11", "fig12",
                                             "fig13", "fig14", "fig15", "fig16", "fig17", "fig18", "kor22-table4",
                                             "kor22-table5", "mcore-h100", "bloom-176b"}));
  EXPECT_EQ(cfgs.size(), 10u + 12 + 26 + 5 + 10 + 12 + 8 + 10 + 10 + 10 + 15 + 8 + 13 + 10 + 10 + 10 + 9 + 5);
}

// Korthikanti et al. 2022, Table 3 (and Table 4's 22B layer): s = 2048, V = 51200, fp16, t = 8, the
// 2022 code; full recomputation against sequence parallelism with selective recomputation.
TEST(SweepSpecs, Kor22HasTheirTable3Settings) {
  const auto t5 = dry_run("kor22-table5");
  ASSERT_EQ(t5.size(), 10u);
  for (const auto& c : t5) {
    const bool d8 = c.at("x") == "530B, 2240 GPUs";  // the abstract's 2240-GPU run
    EXPECT_EQ(c.at("seq_length"), "2048");
    EXPECT_EQ(c.at("vocab_size"), "51200");
    EXPECT_EQ(c.at("precision"), "f16");
    EXPECT_EQ(num(c, "tp"), 8);
    EXPECT_EQ(num(c, "dp"), d8 ? 8 : 1);
    EXPECT_EQ(num(c, "gpus"), num(c, "tp") * num(c, "pp") * num(c, "dp"));
    EXPECT_EQ(c.at("stack"), "megatron-2022");
    const bool present = c.at("series") == "Present work";
    EXPECT_EQ(c.at("recompute"), present ? "selective" : "full");
    EXPECT_EQ(c.at("sequence_parallel"), present ? "1" : "0");
    EXPECT_EQ(num(c, "global_batch"), c.at("x") == "22B" ? 4 : num(c, "gpus"));
  }
  expect_model(t5[4], 128, 25600, 160);  // 1T
  EXPECT_EQ(num(t5[4], "pp"), 64);
  expect_model(t5[3], 105, 20480, 128);  // 530B on 2240 GPUs
  EXPECT_EQ(num(t5[3], "gpus"), 2240);
  expect_model(t5[2], 105, 20480, 128);  // 530B
  EXPECT_EQ(num(t5[2], "pp"), 35);
  EXPECT_EQ(num(t5[2], "vpp"), 3);
  const auto t4 = dry_run("kor22-table4");
  ASSERT_EQ(t4.size(), 10u);
  for (const auto& c : t4) {
    EXPECT_EQ(num(c, "hidden"), 6144);
    EXPECT_EQ(num(c, "micro_batch"), 4);
    EXPECT_EQ(num(c, "tp"), 8);
  }
}

// The Megatron-LM README's H100 table: d = 48, s = 4096, V = 131072, bf16, Megatron-Core.
TEST(SweepSpecs, McoreH100HasTheReadmesLayouts) {
  const auto cfgs = dry_run("mcore-h100");
  ASSERT_EQ(cfgs.size(), 9u);
  for (const auto& c : cfgs) {
    EXPECT_EQ(num(c, "dp"), 48);
    EXPECT_EQ(c.at("seq_length"), "4096");
    EXPECT_EQ(c.at("vocab_size"), "131072");
    EXPECT_EQ(c.at("precision"), "bf16");
    EXPECT_EQ(c.at("stack"), "mcore");
    EXPECT_EQ(c.at("zero"), "1");
    EXPECT_EQ(c.at("sequence_parallel"), num(c, "tp") > 1 ? "1" : "0");
  }
  expect_model(cfgs[8], 112, 18432, 144);
  EXPECT_EQ(num(cfgs[8], "gpus"), 6144);
  EXPECT_EQ(num(cfgs[8], "global_batch"), 3072);
}

// ---- bad specs -----------------------------------------------------------------------------------

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

const char* kGoodSpec = R"(name = "mine"
title = "a test sweep"
metric = "tflops_per_gpu"
paper = "none"
[base]
model = "tiny"
precision = "f32"
[[series]]
name = "B = 8"
global_batch = 8
[[points]]
x = "1"
tp = 1
[[points]]
x = "2"
tp = 2
)";

TEST(SweepSpecs, ACustomSpecFileExpands) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", write(dir, "mine.toml", kGoodSpec), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
}

TEST(SweepSpecs, BadSpecsAreRefusedNamingTheFileAndTheRule) {
  TempDir dir;
  struct Case {
    std::string text;
    std::vector<std::string> needles;
  };
  const std::string good = kGoodSpec;
  const std::vector<Case> cases = {
      {good + "bogus = 1\n", {"bad.toml", "unknown key 'bogus'"}},
      {"name = \"x\"\n[base\n", {"bad.toml:2"}},
      {std::string(kGoodSpec).replace(good.find("tp = 2"), 6, "tp = 3"), {"bad.toml", "x '2'", "--tp 3 must divide --heads 4"}},
      {std::string(kGoodSpec).replace(good.find("tp = 2"), 6, "tpp = 2"), {"bad.toml", "unknown key 'tpp'"}},
      {std::string(kGoodSpec).replace(good.find("tp = 2"), 6, "tp = \"2\""), {"bad.toml", "'tp' must be an integer"}},
      {std::string(kGoodSpec).replace(good.find("metric = \"tflops_per_gpu\""), 25, "metric = \"speed\""),
       {"bad.toml", "metric 'speed'"}},
      {good + "[[series]]\nname = \"B = 8\"\n", {"bad.toml", "series 'B = 8' appears twice"}},
      {good + "[[series]]\nname = \"only\"\nonly = [\"7\"]\n", {"bad.toml", "'only' names x '7'"}},
      // The name becomes a file under --out: nothing that leaves it.
      {std::string(kGoodSpec).replace(0, 13, "name = \"../x\""), {"bad.toml", "name '../x' must be a plain file name"}},
      {std::string(kGoodSpec).replace(0, 13, "name = \"/tmp/x\""), {"bad.toml", "name '/tmp/x' must be a plain"}},
      {std::string(kGoodSpec).replace(0, 13, "name = \"a/b\""), {"bad.toml", "name 'a/b' must be a plain"}},
      {std::string(kGoodSpec).replace(good.find("tp = 2"), 6, "stack = \"mcore-2030\""),
       {"bad.toml", "--stack 'mcore-2030' must be megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp"}},
      {std::string(kGoodSpec).replace(good.find("tp = 2"), 6, "sequence_parallel = 1"),
       {"bad.toml", "'sequence_parallel' must be"}},
      {good + "[[series]]\nname = \"m\"\nmetric = \"speed\"\n", {"bad.toml", "[[series]] #2", "metric 'speed'"}},
  };
  for (const auto& c : cases) {
    const std::string path = write(dir, "bad.toml", c.text);
    const CliResult r = run_ptdp(dir, {"reproduce", path, "--dry-run"});
    EXPECT_TRUE(IsUsageError(r, c.needles)) << c.text;
  }
}

TEST(SweepSpecs, TextQuotedFromASpecStaysOnOneLine) {
  TempDir dir;
  const std::string good = kGoodSpec;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kind = \"a\\nb\"\n" + good, "kind 'a\\nb' must be train, bubble or eq1"},
      {"\"x\\ny\" = 1\n" + good, "unknown key 'x\\ny'"},
      {good + "[[series]]\nname = \"s\"\nmodel = \"ti\\r\\nny\"\n", "--model 'ti\\r\\nny' is not a preset"},
      {good + "[[series]]\nname = \"s\\tt\"\nschedule = \"x\\ny\"\n",
       "[[series]] #2: --schedule 'x\\ny' must be gpipe, 1f1b or interleaved"},
      {"name = f\n", "bad.toml:1:"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string path = write(dir, "bad.toml", text);
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"reproduce", path, "--dry-run"}), {needle})) << text;
  }
}

// Several reproduce runs writing one --out at once (appends, and --force's in-place replaces):
// the file keeps its header once and exactly one row per configuration.
TEST(SweepSpecs, ConcurrentReproduceRunsKeepOneRowPerConfiguration) {
  TempDir dir;
  const std::string spec = write(dir, "mine.toml", kGoodSpec), out = dir.file("out");
  std::vector<std::thread> runs;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    runs.emplace_back([&, w] {
      for (int round = 0; round < 3; ++round) {
        std::vector<std::string> args = {"reproduce", spec, "--mode", "simulate", "--out", out};
        if ((w + round) % 2) args.push_back("--force");
        if (run_ptdp(dir, args, 120).exit_code != 0) ++failures;
      }
    });
  for (auto& t : runs) t.join();
  EXPECT_EQ(failures.load(), 0);
  const auto lines = lines_of(testing::text_of(out + "/mine.csv"));
  ASSERT_EQ(lines.size(), 3u) << testing::text_of(out + "/mine.csv");
  EXPECT_EQ(lines[0].rfind("experiment,mode,", 0), 0u);
  EXPECT_NE(lines[1], lines[2]);
}

// The artefacts' result files under results/ (name, path): those in the contract's columns.
std::vector<std::pair<std::string, std::string>> committed_result_files() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& name : artefact_names()) {
    const std::string path = std::string(PTDP_SOURCE_DIR) + "/results/" + name + ".csv";
    std::ifstream in(path);
    std::string first;
    if (std::getline(in, first) && first.rfind("experiment,mode,", 0) == 0) out.emplace_back(name, path);
  }
  return out;
}

// Each artefact's file in results/ holds one row per configuration: `reproduce --force` replaces a
// configuration's row, also one written before a key column existed (read as its old default,
// Field::key). Rows kept beside their replacements once made these files grow at every run.
TEST(SweepSpecs, EachArtefactsResultFileHasOneRowPerConfiguration) {
  const auto files = committed_result_files();
  EXPECT_GT(files.size(), 10u);
  for (const auto& [name, path] : files) {
    const CsvTable t = read_sweep_keys(path);
    std::map<std::string, int> first_line;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto [it, fresh] = first_line.emplace(sweep_row_key(t, i), t.line(i));
      EXPECT_TRUE(fresh) << path << ": lines " << it->second << " and " << t.line(i) << " are one configuration";
    }
  }
}

// The simulated rows in results/ are the current model's: `reproduce all --mode simulate` run now
// gives every committed simulated row again (the same configurations, none left over from an older
// sweep, the same numbers), so a change to the model lands with its results regenerated
// (scripts/reproduce.sh; docs/RESULTS.md).
TEST(SweepSpecs, CommittedSimulatedRowsAreTheCurrentModels) {
  TempDir dir;
  const CliResult r = run_ptdp(dir, {"reproduce", "all", "--mode", "simulate", "--out", dir.file("")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> values = {"mode", "iter_time_ms", "tflops_per_gpu", "peak_mem_gb", "bubble_fraction"};
  struct Row {
    int line = 0;
    std::vector<std::optional<double>> v;
  };
  auto simulated = [&values](const std::string& path) {
    std::map<std::string, Row> out;
    const CsvTable t = read_sweep_keys(path, values);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.text(i, "mode") != "simulate") continue;
      Row& row = out[sweep_row_key(t, i)];
      row.line = t.line(i);
      for (size_t k = 1; k < values.size(); ++k) row.v.push_back(t.number_or_empty(i, values[k]));
    }
    return out;
  };
  const auto files = committed_result_files();
  EXPECT_GT(files.size(), 10u);
  for (const auto& [name, committed] : files) {
    const auto want = simulated(dir.file(name + ".csv")), have = simulated(committed);
    for (const auto& [key, row] : have) {
      const std::string at = committed + ":" + std::to_string(row.line);
      const auto it = want.find(key);
      if (it == want.end()) {
        ADD_FAILURE() << at << ": a simulated row of a configuration the sweep no longer has";
        continue;
      }
      for (size_t k = 0; k < row.v.size(); ++k) {
        const std::optional<double>& now = it->second.v[k];
        ASSERT_EQ(row.v[k].has_value(), now.has_value()) << at << ": " << values[k + 1];
        if (now) {
          EXPECT_NEAR(*row.v[k], *now, 1e-4 * std::abs(*now))
              << at << ": " << values[k + 1] << " is not the model's now (run scripts/reproduce.sh)";
        }
      }
    }
    for (const auto& [key, row] : want)
      EXPECT_TRUE(have.count(key)) << committed << ": no simulated row for the configuration of line " << row.line
                                   << " of a fresh run (run scripts/reproduce.sh)";
  }
}

// Each size within its field's bound (4096 for t, p, d and v); their products must not wrap.
TEST(SweepSpecs, LayoutProductsBeyondIntAreRefusedNotWrapped) {
  TempDir dir;
  const std::string head = "name = \"b\"\ntitle = \"t\"\nkind = \"bubble\"\nmetric = \"bubble_fraction\"\n"
                           "paper = \"none\"\n[base]\ntp = 1\nmicro_batch = 1\nschedule = \"1f1b\"\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "[[series]]\nname = \"s\"\ngpus = 65536\nglobal_batch = 64\n[[points]]\nx = \"1\"\n"
              "tp = 65536\ndp = 65536\n",
       "key 'dp' = 65536 must be at most 4096"},
      {head + "[[series]]\nname = \"s\"\nglobal_batch = 1073741824\n[[points]]\nx = \"1\"\n"
              "tp = 4096\npp = 4096\ndp = 1\n",
       "tp 4096 x pp 4096 x dp 1 = 16777216 ranks, more than 2^20"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string path = write(dir, "big.toml", text);
    EXPECT_TRUE(IsUsageError(run_ptdp(dir, {"reproduce", path, "--dry-run"}), {needle})) << text;
  }
}

}  // namespace
}  // namespace ptdp

namespace ptdp {
namespace {

// Points that differ only in a setting that changes what is measured (ZeRO, sequence parallelism,
// the simulated stack, the model's shape or architecture, the overlap of the data-parallel
// reduction) are distinct configurations: each gets its row, with the setting in it, and a second
// run finds every one of them already there.
TEST(SweepSpecs, PointsThatDifferOnlyInZeroOrStackOrShapeEachKeepTheirRow) {
  TempDir dir;
  const std::string spec = write(dir, "kinds.toml", R"(name = "kinds"
title = "points differing in one setting"
metric = "tflops_per_gpu"
paper = "none"
[base]
model = "tiny"
precision = "f32"
gpus = 2
dp = 2
global_batch = 8
micro_batch = 4
[[series]]
name = "s"
[[points]]
x = "z0"
zero = 0
[[points]]
x = "z1"
zero = 1
[[points]]
x = "z3"
zero = 3
[[points]]
x = "mcore"
stack = "mcore"
[[points]]
x = "sp"
stack = "mcore"
tp = 2
dp = 1
sequence_parallel = true
[[points]]
x = "deep"
layers = 8
[[points]]
x = "counted"
layers = 6
pp = 2
dp = 1
account_for_embedding_in_pipeline_split = true
account_for_loss_in_pipeline_split = true
[[points]]
x = "overlap"
overlap_grad_reduce = true
)");
  const std::string out = dir.file("out");
  const CliResult r = run_ptdp(dir, {"reproduce", spec, "--mode", "simulate", "--out", out}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = lines_of(testing::text_of(out + "/kinds.csv"));
  ASSERT_EQ(lines.size(), 9u) << testing::text_of(out + "/kinds.csv");
  const auto header = split_csv_line(lines[0]);
  std::vector<Config> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split_csv_line(lines[i]);
    Config c;
    for (size_t k = 0; k < header.size() && k < f.size(); ++k) c[header[k]] = f[k];
    rows.push_back(c);
  }
  EXPECT_EQ(rows[0]["zero"], "0");
  EXPECT_EQ(rows[1]["zero"], "1");
  EXPECT_EQ(rows[2]["zero"], "3");
  EXPECT_EQ(rows[0]["arch"], "gpt");
  EXPECT_NE(rows[0]["peak_mem_gb"], rows[2]["peak_mem_gb"]);  // ZeRO-3 holds less per rank
  EXPECT_EQ(rows[4]["sequence_parallel"], "1");
  EXPECT_EQ(rows[5]["layers"], "8");
  EXPECT_EQ(rows[6]["stage_layers"], "embedding+loss");
  // The printed table has each point's own value, not the first one's repeated.
  auto printed = [&](const std::string& x) {
    for (const auto& l : lines_of(r.out))
      if (l.find(" " + x + "  ours ") != std::string::npos) return l.substr(l.rfind(' ') + 1);
    return std::string("none");
  };
  EXPECT_NE(printed("z0"), "none") << r.out;
  EXPECT_NE(printed("z0"), printed("z1")) << r.out;
  EXPECT_NE(printed("z0"), printed("z3")) << r.out;
  EXPECT_NE(rows[0]["tflops_per_gpu"], rows[3]["tflops_per_gpu"]);  // the stack
  EXPECT_EQ(rows[0]["overlap_grad_reduce"], "0");
  EXPECT_EQ(rows[7]["overlap_grad_reduce"], "1");
  EXPECT_NE(printed("z0"), printed("overlap")) << r.out;  // the overlapped reduction is faster
  const CliResult again = run_ptdp(dir, {"reproduce", spec, "--mode", "simulate", "--out", out}, 120);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(lines_of(testing::text_of(out + "/kinds.csv")).size(), 9u);
}

// A result file written before the zero and arch columns existed is still read (its rows are
// zero 0, gpt), and appending to it brings it to today's header first, its rows kept.
TEST(SweepSpecs, AFileWithoutTheZeroAndArchColumnsIsReadAndBroughtUpToDate) {
  TempDir dir;
  std::string header = result_header_line();
  header = header.substr(0, header.find(",zero,arch"));
  const std::string path = write(dir, "old.csv", header + "\n");
  EXPECT_TRUE(sweep_keys_in_csv(path).empty());
  const CliResult r = run_ptdp(dir, {"reproduce", write(dir, "mine.toml", kGoodSpec), "--mode", "simulate",
                                     "--out", dir.file("o")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t rows = lines_of(testing::text_of(dir.file("o/mine.csv"))).size();
  std::filesystem::copy_file(path, dir.file("o/mine.csv"), std::filesystem::copy_options::overwrite_existing);
  const CliResult again =
      run_ptdp(dir, {"reproduce", dir.file("mine.toml"), "--mode", "simulate", "--out", dir.file("o")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::vector<std::string> lines = lines_of(testing::text_of(dir.file("o/mine.csv")));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], result_header_line());
  EXPECT_EQ(lines.size(), rows);  // every configuration again, under today's header
}

}  // namespace
}  // namespace ptdp
