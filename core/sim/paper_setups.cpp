#include "core/sim/paper_setups.h"

#include <cmath>
#include <cstdio>

#include "core/common/error.h"

namespace ptdp::sim {

RunConfig paper_run(int layers, int hidden, int heads, int tp, int pp, int dp, int micro_batch, int global_batch,
                    int vpp) {
  RunConfig c;
  c.experiment = "simulate";
  c.model.name = "paper";
  c.model.layers = layers;
  c.model.hidden = hidden;
  c.model.heads = heads;
  c.model.seq_length = 2048;
  c.model.vocab_size = 51200;
  c.par.tp = tp;
  c.par.pp = pp;
  c.par.dp = dp;
  c.par.vpp = vpp;
  c.par.micro_batch = micro_batch;
  c.par.global_batch = global_batch;
  c.par.schedule = vpp > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
  c.par.recompute = Recompute::Full;
  c.par.scatter_gather = true;
  c.backend = BackendKind::Cuda;
  c.precision = Precision::F16;
  validate_run(c);
  return c;
}

RunConfig table2_run(const std::string& scheme, double params_b, int gpus, int global_batch, int micro_batch) {
  const bool big = std::abs(params_b - 529.6) < 0.5;
  if (!big && std::abs(params_b - 174.6) >= 0.5)
    usage_error("Table 2 has the 174.6B and 529.6B models, not {}B", params_b);
  const int layers = big ? 105 : 96, hidden = big ? 20480 : 12288, heads = big ? 128 : 96;
  RunConfig c;
  if (scheme == "ZeRO-3") {
    c = paper_run(layers, hidden, heads, 1, 1, gpus, micro_batch, global_batch);
    c.par.zero = 3;
  } else if (scheme == "PTD-P") {
    const int pp = big ? 35 : 12, vpp = big ? 3 : 4;
    if (gpus % (8 * pp) != 0) usage_error("PTD-P {}B: {} GPUs is not a multiple of t x p = {}", params_b, gpus, 8 * pp);
    c = paper_run(layers, hidden, heads, 8, pp, gpus / (8 * pp), micro_batch, global_batch, vpp);
  } else {
    usage_error("Table 2 scheme '{}' must be ZeRO-3 or PTD-P", scheme);
  }
  c.experiment = "table2";
  return c;
}

namespace {

int int_of(const std::string& s, const std::string& what) {
  int v = 0;
  if (std::sscanf(s.c_str(), "%d", &v) != 1) usage_error("{}: '{}' is not a number", what, s);
  return v;
}

// "Batch size = 128" -> 128.
int batch_of(const std::string& series) {
  int v = 0;
  if (std::sscanf(series.c_str(), "Batch size = %d", &v) != 1) usage_error("series '{}' names no batch size", series);
  return v;
}

// "(8, 8)" -> {8, 8}.
std::pair<int, int> pair_of(const std::string& x) {
  int a = 0, b = 0;
  if (std::sscanf(x.c_str(), "(%d, %d)", &a, &b) != 2) usage_error("x '{}' is not a pair (a, b)", x);
  return {a, b};
}

}  // namespace

FigurePointSetup figure_point(const std::string& fig, const std::string& series, const std::string& x) {
  FigurePointSetup out;
  if (fig == "fig11") {  // weak scaling of the pipeline: l = 3p, h = 20480, t = 8, b = 1, d = 1
    const int p = int_of(x, "fig11 x");
    out.cfg = paper_run(3 * p, 20480, 128, 8, p, 1, 1, batch_of(series));
  } else if (fig == "fig12" || fig == "fig18") {  // GPT-3 175B on 96 GPUs, t = 8, p = 12, b = 1
    const int B = int_of(x, fig + " x");
    const bool interleaved = series == "Interleaved" || fig == "fig18";
    out.cfg = paper_run(96, 12288, 96, 8, 12, 1, 1, B, interleaved ? 4 : 1);
    if (series == "Unoptimized") out.cfg.par.scatter_gather = false;
    else if (series != "Interleaved" && series != "Non-interleaved" && series != "Scatter/gather optimization")
      usage_error("{}: unknown series '{}'", fig, series);
  } else if (fig == "fig13") {  // 162B on 64 GPUs, (p, t), d = 1, b = 1
    const auto [p, t] = pair_of(x);
    out.cfg = paper_run(32, 20480, 128, t, p, 1, 1, batch_of(series));
  } else if (fig == "fig14") {  // 5.9B on 64 GPUs, (p, d), t = 1, b = 1
    const auto [p, d] = pair_of(x);
    out.cfg = paper_run(32, 3840, 32, 1, p, d, 1, batch_of(series));
  } else if (fig == "fig15") {  // 5.9B on 64 GPUs, (t, d), p = 1, b = 1
    const auto [t, d] = pair_of(x);
    out.cfg = paper_run(32, 3840, 32, t, 1, d, 1, batch_of(series));
  } else if (fig == "fig16") {  // 91B on 64 GPUs, (t, p) = (8, 8), micro-batch b
    out.cfg = paper_run(32, 15360, 128, 8, 8, 1, int_of(x, "fig16 x"), batch_of(series));
  } else if (fig == "fig17") {  // 145B on 128 GPUs, (t, p) = (8, 16), b = 1, recompute on/off
    out.cfg = paper_run(80, 12288, 96, 8, 16, 1, 1, int_of(x, "fig17 x"));
    if (series == "W/o act. recomputation") out.cfg.par.recompute = Recompute::None;
    else if (series != "Act. recomputation") usage_error("fig17: unknown series '{}'", series);
    out.sequences_per_s = true;
  } else {
    usage_error("figure '{}' has no simulated setup (fig11 ... fig18)", fig);
  }
  out.cfg.experiment = fig;
  return out;
}

}  // namespace ptdp::sim
