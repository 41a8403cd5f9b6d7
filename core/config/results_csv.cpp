#include "core/config/results_csv.h"

#include <algorithm>

#include "core/accounting/flops.h"
#include "core/common/error.h"
#include "core/config/config_fields.h"
#include "core/results/output_files.h"

namespace ptdp {

namespace {

// The contract's columns (DESIGN.md), present in every result file ptdp ever wrote.
const std::vector<std::string>& contract_columns() {
  static const std::vector<std::string> cols = {
      "experiment", "mode", "backend", "comm", "precision", "model", "params", "layers", "hidden",
      "heads", "seq_length", "vocab_size", "gpus", "tp", "pp", "dp", "vpp", "micro_batch",
      "global_batch", "num_microbatches", "schedule", "recompute", "scatter_gather", "iters",
      "iter_time_ms", "tflops_per_gpu", "pct_peak", "tokens_per_s", "seq_per_s", "bubble_fraction",
      "peak_mem_gb", "loss", "git_sha", "host", "device", "timestamp"};
  return cols;
}

// The columns added since, in the order they came: the header's history (a file of an older ptdp
// has a prefix of them). A field's new column comes after them by itself, in table order; once
// rows with it are kept (results/), it joins this list, so that a column added later, from any
// table, comes after it (ResultsDir.EveryResultFileHasTodaysHeaderOrAnOlderOne fails otherwise).
const std::vector<std::string>& later_columns() {
  static const std::vector<std::string> cols = {
      "model_tflops_per_gpu", "fwd_ms", "bwd_ms", "p2p_wait_ms", "dp_ms", "optimizer_ms", "p2p_bytes",
      "activation_gb", "sequence_parallel", "stack", "layer_fwd_ms", "layer_bwd_ms", "zero", "arch",
      "valid_loss", "valid_ppl", "data", "data_order", "data_sources", "query_groups", "ffn_hidden_size",
      "norm_eps", "stage_layers", "make_vocab_size_divisible_by", "overlap_grad_reduce", "grad_bucket_size",
      "rope_theta", "cp", "cp_comm_type", "use_precision_aware_optimizer", "main_params_dtype", "main_grads_dtype",
      "exp_avg_dtype", "exp_avg_sq_dtype", "attention_backend", "grad_reduce_in_bf16",
      "overlap_param_gather_with_optimizer_step"};
  return cols;
}

// Columns derived from several fields that identify a configuration: in the key.
const std::vector<std::string>& derived_key_columns() {
  static const std::vector<std::string> cols = {"mode", "gpus", "stage_layers"};
  return cols;
}

// The result columns that are no field and not in the key, with why a run differing there
// measured the same configuration.
const std::map<std::string, std::string>& other_column_reasons() {
  static const std::map<std::string, std::string> m = [] {
    const std::string measured = "a result of the run (measured, or the simulator's estimate), not a setting";
    const std::string provenance =
        "provenance: which build, machine or time measured it (compare --per-machine also pairs by host and device)";
    std::map<std::string, std::string> r = {
        {"params", "the model's size, which its shape (model, arch, layers, hidden, ... in the key) determines"},
        {"num_microbatches", "global_batch / (micro_batch x dp), all in the key"},
        {"data_sources", "which tokens each data source gave: the step's work is the same for any data of the same shape"},
        {"git_sha", provenance}, {"host", provenance}, {"device", provenance}, {"timestamp", provenance}};
    for (const char* c : {"iter_time_ms", "tflops_per_gpu", "pct_peak", "tokens_per_s", "seq_per_s", "bubble_fraction",
                          "peak_mem_gb", "loss", "model_tflops_per_gpu", "fwd_ms", "bwd_ms", "p2p_wait_ms", "dp_ms",
                          "optimizer_ms", "p2p_bytes", "activation_gb", "layer_fwd_ms", "layer_bwd_ms", "valid_loss",
                          "valid_ppl"})
      r[c] = measured;
    return r;
  }();
  return m;
}

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

size_t column_index(const std::string& c) {
  const auto& cols = result_columns();
  for (size_t i = 0; i < cols.size(); ++i)
    if (cols[i] == c) return i;
  PTDP_CHECK(false, "no result column named {}", c);
  return 0;
}

std::string quote(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string r = "\"";
  for (char ch : v) r += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return r + "\"";
}

// How the placement flags lay out the stages, in one spelling: the layout ("E1|2|2|1L"), what
// counts as a layer ("embedding", "loss", "embedding+loss"), or "FIRST:LAST" (0: an even share);
// empty for an even split.
std::string stage_layers(const RunConfig& c) {
  const ParallelConfig& p = c.par;
  if (!p.layout_chunks.empty()) return canonical_layout(p.layout_chunks);
  if (p.embedding_in_split || p.loss_in_split)
    return p.embedding_in_split && p.loss_in_split ? "embedding+loss" : (p.embedding_in_split ? "embedding" : "loss");
  if (p.layer_split(c.model.layers).uneven())
    return std::to_string(p.first_stage_layers) + ":" + std::to_string(p.last_stage_layers);
  return "";
}

}  // namespace

const std::vector<std::string>& result_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> v = contract_columns();
    v.insert(v.end(), later_columns().begin(), later_columns().end());
    for (const Field* f : all_fields())
      if (f->row_use() != RowUse::None && !contains(v, f->name())) v.push_back(f->name());
    return v;
  }();
  return cols;
}

std::string result_header_line() {
  std::string h;
  for (const auto& c : result_columns()) h += (h.empty() ? "" : ",") + c;
  return h;
}

std::string foreign_header_reason(const std::string& first_line) {
  return ptdp::foreign_header_reason(result_header_line(), first_line);
}

const std::vector<std::string>& config_key_columns() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v;
    for (const std::string& c : result_columns()) {
      const Field* f = find_field(c);
      if (contains(derived_key_columns(), c) || (f && f->in_key() && f->name() == c)) v.push_back(c);
    }
    return v;
  }();
  return k;
}

const std::map<std::string, std::string>& config_key_defaults() {
  static const std::map<std::string, std::string> d = [] {
    std::map<std::string, std::string> m;
    for (const std::string& c : config_key_columns()) {
      if (contains(contract_columns(), c)) continue;  // in every file
      const Field* f = find_field(c);
      m[c] = f ? f->key_default() : "";
    }
    return m;
  }();
  return d;
}

std::string config_key_value(const std::string& column, const std::string& text) {
  if (!text.empty()) return text;
  const auto it = config_key_defaults().find(column);
  return it == config_key_defaults().end() ? text : it->second;
}

std::string config_key(const std::function<std::string(const std::string&)>& field) {
  std::string k;
  for (const auto& c : config_key_columns()) k += config_key_value(c, field(c)) + '\x1f';
  return k;
}

std::string not_key_reason(const std::string& column) {
  if (contains(config_key_columns(), column)) return "";
  if (const Field* f = find_field(column); f && f->name() == column) return f->not_key_reason();
  const auto it = other_column_reasons().find(column);
  return it == other_column_reasons().end() ? "" : it->second;
}

void ResultRow::set(const std::string& column, const std::string& value) { values_[column_index(column)] = value; }
void ResultRow::set(const std::string& column, double value) { values_[column_index(column)] = fmt::format("{:.6g}", value); }
void ResultRow::set(const std::string& column, long long value) { values_[column_index(column)] = std::to_string(value); }
const std::string& ResultRow::get(const std::string& column) const { return values_[column_index(column)]; }

std::string ResultRow::to_csv_line() const {
  std::string line;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (i) line.push_back(',');
    line.append(quote(values_[i]));
  }
  return line;
}

ResultRow config_row(const RunConfig& c, const std::string& mode) {
  const bool simulated = mode == "simulate";
  ResultRow r;
  for (const Field* f : all_fields()) {
    const RowUse use = f->row_use();
    if (use == RowUse::Every || (use == RowUse::Simulated && simulated) || (use == RowUse::Measured && !simulated))
      r.set(f->name(), f->cell(c));
  }
  r.set("mode", mode);
  r.set("params", static_cast<long long>(params_exact(c.model)));
  r.set("gpus", c.ranks > 0 ? c.ranks : c.par.tp * c.par.cp * c.par.pp * c.par.dp);
  r.set("num_microbatches", c.par.num_microbatches());
  r.set("stage_layers", stage_layers(c));
  return r;
}

// An older ptdp's row in a column it lacked: the key's old default (what such a row meant), else
// empty (nothing was recorded).
std::string older_row_cell(const std::string& column) { return config_key_value(column, ""); }

void append_result_rows(const std::string& path, const std::vector<ResultRow>& rows) {
  std::vector<std::string> lines;
  for (const ResultRow& r : rows) lines.push_back(r.to_csv_line());
  append_csv_lines(path, result_header_line(), lines, older_row_cell);
}

void update_result_file(const std::string& path, const std::function<std::string(const std::string&)>& update) {
  update_csv_file(path, result_header_line(), update, older_row_cell);
}

void check_result_csv(const std::string& path, const std::string& flag) {
  check_csv_output(path, result_header_line(), flag, true);
}

}  // namespace ptdp
