// Test helpers for the simulator: the paper's Table 1 and figure data (results/paper/*.csv, read
// with fast-cpp-csv-parser) and the a100-selene profile.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include <cmath>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/sim/hardware.h"
#include "core/sim/paper_setups.h"
#include "core/sim/simulator.h"

#ifndef PTDP_SOURCE_DIR
#error "PTDP_SOURCE_DIR must be defined by the build"
#endif

namespace ptdp::sim::testing {

inline std::string source_path(const std::string& rel) { return std::string(PTDP_SOURCE_DIR) + "/" + rel; }

struct Table1Row {
  double params_b = 0, tflops = 0;
  int heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, global_batch = 0, micro_batch = 0, dp = 0,
      microbatches = 0, vpp = 0;
};

inline std::vector<Table1Row> read_table1() {
  io::CSVReader<15> in(source_path("results/paper/table1.csv"));
  in.read_header(io::ignore_extra_column, "params_b", "heads", "hidden", "layers", "tp", "pp", "gpus",
                 "global_batch", "micro_batch", "dp", "num_microbatches", "vpp", "tflops_per_gpu", "pct_peak",
                 "aggregate_pflops");
  std::vector<Table1Row> rows;
  Table1Row r;
  double pct = 0, agg = 0;
  while (in.read_row(r.params_b, r.heads, r.hidden, r.layers, r.tp, r.pp, r.gpus, r.global_batch, r.micro_batch, r.dp,
                     r.microbatches, r.vpp, r.tflops, pct, agg))
    rows.push_back(r);
  return rows;
}

struct Table2Row {
  std::string scheme;  // ZeRO-3 | PTD-P
  double params_b = 0, tflops = 0, days = 0;
  int model_parallel = 0, global_batch = 0, gpus = 0, micro_batch = 0;
};

inline std::vector<Table2Row> read_table2() {
  io::CSVReader<8> in(source_path("results/paper/table2.csv"));
  in.read_header(io::ignore_extra_column, "scheme", "params_b", "model_parallel_size", "global_batch", "gpus",
                 "micro_batch", "tflops_per_gpu", "days_300b_tokens");
  std::vector<Table2Row> rows;
  Table2Row r;
  while (in.read_row(r.scheme, r.params_b, r.model_parallel, r.global_batch, r.gpus, r.micro_batch, r.tflops, r.days))
    rows.push_back(r);
  return rows;
}

struct FigurePoint {
  std::string figure, series, x;
  double value = 0;
  std::string unit;
};

inline std::vector<FigurePoint> read_figure(const std::string& figure) {
  io::CSVReader<5, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(source_path("results/paper/figures.csv"));
  in.read_header(io::ignore_extra_column, "figure", "series", "x", "value", "unit");
  std::vector<FigurePoint> pts;
  FigurePoint p;
  while (in.read_row(p.figure, p.series, p.x, p.value, p.unit))
    if (p.figure == figure) pts.push_back(p);
  return pts;
}

inline const HardwareProfile& selene() {
  static const HardwareProfile hw = load_profile(source_path("hardware/a100-selene.toml"));
  return hw;
}

inline double pct_error(double predicted, double paper) { return 100.0 * (predicted - paper) / paper; }

}  // namespace ptdp::sim::testing
