#include "core/config/run_config_fields.h"

#include <fmt/format.h>

namespace ptdp {

namespace {

std::string text(const std::string& v) { return v; }
std::string text(bool v) { return v ? "true" : "false"; }
std::string text(int v) { return std::to_string(v); }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(uint64_t v) { return std::to_string(v); }
std::string text(double v) { return fmt::format("{:.17g}", v); }

}  // namespace

std::vector<std::pair<std::string, std::string>> run_config_fields(const RunConfig& c) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.par;
  const OptimizerConfig& o = c.opt;
  std::vector<std::pair<std::string, std::string>> f;
  auto add = [&](const char* flag, const auto& v) { f.emplace_back(flag, text(v)); };
  // Model.
  add("--model", m.name);
  add("--layers", m.layers);
  add("--hidden", m.hidden);
  add("--heads", m.heads);
  add("--seq-length", m.seq_length);
  add("--vocab-size", m.vocab_size);
  add("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by);
  add("--num-query-groups", m.query_groups);
  add("--ffn-hidden-size", m.ffn_hidden_size);
  add("--norm-epsilon", m.layernorm_eps);
  add("init std", m.init_std);
  add("--arch", std::string(arch_name(m.arch)));
  add("rope theta", m.rope_theta);
  // Parallel layout.
  add("--tp", p.tp);
  add("--pp", p.pp);
  add("--dp", p.dp);
  add("--vpp", p.vpp);
  add("--decoder-first-pipeline-num-layers", p.first_stage_layers);
  add("--decoder-last-pipeline-num-layers", p.last_stage_layers);
  add("--account-for-embedding-in-pipeline-split", p.embedding_in_split);
  add("--account-for-loss-in-pipeline-split", p.loss_in_split);
  add("--pipeline-model-parallel-layout", p.pipeline_layout);
  add("--micro-batch", p.micro_batch);
  add("--global-batch", p.global_batch);
  add("--schedule", p.schedule);
  add("--recompute", std::string(recompute_name(p.recompute)));
  add("--scatter-gather", p.scatter_gather);
  add("--sequence-parallel", p.sequence_parallel);
  add("--zero", p.zero);
  // Run.
  add("--experiment", c.experiment);
  add("--backend", c.backend);
  add("--comm", c.comm);
  add("--ranks", c.ranks);
  add("--precision", c.precision);
  add("--iters", c.iters);
  add("--warmup", c.warmup);
  add("--seed", c.seed);
  add("--lr", o.lr.max_lr);
  add("--min-lr", o.lr.min_lr);
  add("--lr-warmup-iters", o.lr.warmup_iters);
  add("--lr-decay-iters", o.lr.decay_iters);
  add("--weight-decay", o.weight_decay);
  add("--adam-beta1", o.beta1);
  add("--adam-beta2", o.beta2);
  add("--adam-eps", o.eps);
  add("--clip-grad", o.clip_grad);
  add("--data", c.data);
  add("--data-order", c.data_order);
  add("--split", c.split);
  add("--data-cache-path", c.data_cache);
  add("--csv", c.csv);
  add("--log-interval", c.log_interval);
  add("--eval-iters", c.eval_iters);
  add("--eval-interval", c.eval_interval);
  add("--log-format", c.log_format);
  add("--overlap-grad-reduce", c.overlap_grad_reduce);
  add("--grad-bucket-size", c.grad_bucket_elems);
  add("--comm-timeout", c.comm_timeout_s);
  add("--save", c.save_dir);
  add("--load", c.load_dir);
  add("--save-interval", c.save_interval);
  add("--skip-nonfinite", c.skip_nonfinite);
  add("--loss-log", c.loss_log);
  add("--save-init", c.save_init_dir);
  add("--gemm-rate", c.gemm_rate);
  add("--stack", c.stack);
  add("--loss-scale", c.loss_scale);
  add("--initial-loss-scale", c.initial_loss_scale);
  add("--min-loss-scale", c.min_loss_scale);
  add("--loss-scale-window", c.loss_scale_window);
  add("--hysteresis", c.hysteresis);
  return f;
}

}  // namespace ptdp
