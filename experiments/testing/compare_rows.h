// Helpers of the `ptdp compare` tests (compare_test.cpp, compare_report_test.cpp): result rows of
// one small measured configuration, written as result CSVs, and `ptdp compare` run on them.
#pragma once
#include <string>
#include <vector>

#include "core/config/results_csv.h"
#include "experiments/testing/cli_runner.h"

namespace ptdp::compare_testing {

using testing::CliResult;
using testing::run_ptdp;
using testing::TempDir;

struct Measured {
  std::string model = "small";
  int tp = 1, pp = 1, dp = 1;
  double tflops = 0.136, tokens = 4564, mem = 0.168;
  std::string host = "", device = "";
};

inline ResultRow make_row(const Measured& m) {
  ResultRow r;
  r.set("experiment", std::string("train-small"));
  r.set("mode", std::string("run"));
  r.set("backend", std::string("cpu"));
  r.set("comm", std::string("local"));
  r.set("precision", std::string("f32"));
  r.set("model", m.model);
  r.set("tp", m.tp);
  r.set("pp", m.pp);
  r.set("dp", m.dp);
  r.set("vpp", 1);
  r.set("micro_batch", 4);
  r.set("global_batch", 8);
  r.set("schedule", std::string("1f1b"));
  r.set("recompute", std::string("none"));
  r.set("scatter_gather", 1);
  r.set("tflops_per_gpu", m.tflops);
  r.set("tokens_per_s", m.tokens);
  r.set("peak_mem_gb", m.mem);
  r.set("git_sha", std::string("0123abcd"));
  if (!m.host.empty()) r.set("host", m.host);
  if (!m.device.empty()) r.set("device", m.device);
  return r;
}

inline std::string write_rows(const TempDir& dir, const std::string& name, const std::vector<Measured>& rows) {
  const std::string path = dir.file(name);
  std::vector<ResultRow> r;
  for (const auto& m : rows) r.push_back(make_row(m));
  append_result_rows(path, r);
  return path;
}

// Two configurations: small at t=1 and t=2.
inline std::vector<Measured> baseline_rows() {
  Measured a, b;
  b.tp = 2;
  b.tflops = 0.09;
  b.tokens = 3000;
  b.mem = 0.1;
  return {a, b};
}

inline CliResult compare(const TempDir& dir, const std::string& base, const std::string& cur,
                         std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"compare", base, cur};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_ptdp(dir, args);
}

inline Measured on(const std::string& host, const std::string& device, double tokens) {
  Measured m;
  m.host = host;
  m.device = device;
  m.tokens = tokens;
  return m;
}

}  // namespace ptdp::compare_testing
