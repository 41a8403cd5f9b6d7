// `ptdp train`: trains with the training core and writes one result row.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/data/indexed_dataset.h"
#include "core/data/samples.h"
#include "core/runtime/flops.h"
#include "core/runtime/memory_estimate.h"
#include "core/runtime/provenance.h"
#include "core/runtime/results_csv.h"
#include "core/tensor/allocator.h"
#include "core/train/trainer.h"
#include "experiments/commands.h"

namespace ptdp {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ResultRow make_row(const RunConfig& c, double iter_ms, double loss, double peak_gb) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.par;
  const double sec = iter_ms / 1e3;
  const int gpus = c.ranks;
  ResultRow r;
  r.set("experiment", c.experiment);
  r.set("mode", std::string("run"));
  r.set("backend", c.backend);
  r.set("comm", c.comm);
  r.set("precision", c.precision);
  r.set("model", m.name);
  r.set("params", static_cast<long long>(params_exact(m)));
  r.set("layers", m.layers);
  r.set("hidden", m.hidden);
  r.set("heads", m.heads);
  r.set("seq_length", m.seq_length);
  r.set("vocab_size", static_cast<long long>(m.vocab_size));
  r.set("gpus", gpus);
  r.set("tp", p.tp);
  r.set("pp", p.pp);
  r.set("dp", p.dp);
  r.set("vpp", p.vpp);
  r.set("micro_batch", p.micro_batch);
  r.set("global_batch", p.global_batch);
  r.set("num_microbatches", p.num_microbatches());
  r.set("schedule", p.schedule);
  r.set("recompute", std::string(recompute_name(p.recompute)));
  r.set("scatter_gather", p.scatter_gather ? 1 : 0);
  r.set("iters", c.iters);
  r.set("iter_time_ms", iter_ms);
  r.set("tflops_per_gpu", flops_eq3(m, p.global_batch) / sec / gpus / 1e12);
  r.set("tokens_per_s", double(p.global_batch) * m.seq_length / sec);
  r.set("seq_per_s", double(p.global_batch) / sec);
  r.set("bubble_fraction", 0.0);  // one pipeline stage: no bubble
  r.set("peak_mem_gb", peak_gb);
  r.set("loss", loss);
  r.set("git_sha", git_sha());
  r.set("host", host_name());
  r.set("device", cpu_name());
  r.set("timestamp", utc_timestamp());
  r.set("model_tflops_per_gpu", flops_model(m, p.global_batch) / sec / gpus / 1e12);
  return r;
}

}  // namespace

int cmd_train(const RunConfig& c) {
  require_single_rank_cpu(c);
  const ModelConfig& m = c.model;
  if (!c.csv.empty()) check_result_csv(c.csv);
  const MemoryEstimate need = estimate_single_rank_f32(m, c.par.micro_batch, c.par.recompute);
  const int64_t have = physical_memory_bytes();
  if (have > 0 && need.total() > have)
    usage_error("--model {} (l={} h={} s={}) with --micro-batch {} needs about {:.1f} GB ({:.1f} GB of weights, "
                "gradients and Adam state, {:.1f} GB of activations), more than the {:.1f} GB of memory here",
                m.name, m.layers, m.hidden, m.seq_length, c.par.micro_batch, need.total() / 1e9,
                need.state_bytes / 1e9, need.activation_bytes / 1e9, have / 1e9);
  std::unique_ptr<IndexedDataset> ds;
  std::unique_ptr<SampleSource> samples;
  if (c.data == "synthetic") {
    samples = std::make_unique<SyntheticSamples>(m.vocab_size, m.seq_length, c.seed);
  } else {
    ds = std::make_unique<IndexedDataset>(IndexedDataset::open(c.data));
    check_vocab(*ds, m.vocab_size, "--vocab-size");
    samples = std::make_unique<DatasetSamples>(*ds, m.seq_length, c.seed);
  }

  auto backend = make_cpu_backend();
  CachingHostAllocator::instance().reset_peak();
  Gpt model(m, ShardSpec{}, *backend, DType::F32);
  model.init(c.seed);
  TrainConfig tc;
  tc.micro_batch = c.par.micro_batch;
  tc.global_batch = c.par.global_batch;
  tc.recompute = c.par.recompute;
  tc.optimizer = c.opt;
  Trainer trainer(model, *samples, tc);

  fmt::print("ptdp train: model {} (l={} h={} a={} s={} V={}, {:.3g}M parameters), b={} B={} m={}, "
             "recompute {}, backend {}, {} iterations ({} untimed), data {}\n",
             m.name, m.layers, m.hidden, m.heads, m.seq_length, m.vocab_size, params_exact(m) / 1e6,
             c.par.micro_batch, c.par.global_batch, trainer.num_microbatches(), recompute_name(c.par.recompute),
             c.backend, c.iters, c.warmup, c.data);
  const double flops = flops_eq3(m, c.par.global_batch);
  const double tokens = double(c.par.global_batch) * m.seq_length;
  std::vector<double> times;
  double loss = 0;
  for (int it = 1; it <= c.iters; ++it) {
    IterStats st = trainer.step();
    if (!std::isfinite(st.loss))
      throw RuntimeError(fmt::format("iteration {}: the loss is not finite ({}); stopping", it, st.loss));
    loss = st.loss;
    if (it > c.warmup) times.push_back(st.time_ms);
    if (it % c.log_interval == 0 || it == c.iters)
      fmt::print(" iteration {:>6}/{} | loss {:.4f} | {:9.2f} ms | {:7.3f} TFLOP/s | {:9.0f} tokens/s | lr {:.3e} | "
                 "grad norm {:.3f}\n",
                 it, c.iters, st.loss, st.time_ms, flops / (st.time_ms / 1e3) / c.ranks / 1e12,
                 tokens / (st.time_ms / 1e3), st.lr, st.grad_norm);
    std::fflush(stdout);
  }
  const double iter_ms = median(times);
  const double peak_gb = double(CachingHostAllocator::instance().peak_bytes_in_use()) / 1e9;
  fmt::print("done: median iteration {:.2f} ms over {} timed iterations, final loss {:.4f}, peak memory {:.3f} GB\n",
             iter_ms, times.size(), loss, peak_gb);
  if (!c.csv.empty()) {
    append_result_rows(c.csv, {make_row(c, iter_ms, loss, peak_gb)});
    fmt::print("appended a row to {}\n", c.csv);
  }
  return 0;
}

}  // namespace ptdp
