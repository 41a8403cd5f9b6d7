#include "experiments/reproduce_llama_data.h"

#include <cmath>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/common/error.h"
#include "core/common/regular_file.h"
#include "core/data/megatron_blend.h"
#include "core/results/provenance.h"
#include "core/results/output_files.h"
#include "experiments/spec_value.h"
#include "experiments/sweep.h"

namespace ptdp {

namespace {

double total_disk_bytes(const LlamaDataSpec& s) {
  double b = 0;
  for (const auto& x : s.sources) b += x.disk_gb * 1e9;
  return b;
}

}  // namespace

LlamaDataSpec parse_llama_data_spec(const std::string& text, const std::string& path) {
  const toml::table root = parse_spec_toml(text, path);
  LlamaDataSpec s;
  s.path = path;
  s.title = spec_value<std::string>(root, "title", path);
  s.train_tokens = spec_value<double>(root, "train_tokens", path);
  s.dataset_tokens = spec_value<double>(root, "dataset_tokens", path);
  s.seq_length = int(spec_value<int64_t>(root, "seq_length", path));
  if (!(s.train_tokens > 0) || !(s.dataset_tokens > 0) || s.seq_length <= 0)
    usage_error("{}: train_tokens, dataset_tokens and seq_length must be positive", path);
  const toml::array* xs = root["sources"].as_array();
  if (!xs || xs->empty()) usage_error("{}: [[sources]] must list at least one source", path);
  for (const auto& e : *xs) {
    const toml::table* t = e.as_table();
    if (!t) usage_error("{}: [[sources]] entries must be tables", path);
    LlamaDataSource x{spec_value<std::string>(*t, "name", path), spec_value<double>(*t, "proportion", path),
                      spec_value<double>(*t, "disk_gb", path), spec_value<double>(*t, "paper_epochs", path)};
    if (!(x.proportion > 0) || !(x.disk_gb > 0) || !(x.paper_epochs > 0))
      usage_error("{}: source '{}': proportion, disk_gb and paper_epochs must be positive", path, x.name);
    s.sources.push_back(x);
  }
  return s;
}

std::vector<LlamaDataRow> llama_data_rows(const LlamaDataSpec& spec) {
  std::vector<double> weights;
  for (const auto& x : spec.sources) weights.push_back(x.proportion);
  const auto requested = int64_t(std::ceil(spec.train_tokens / spec.seq_length));
  const MegatronBlendPlan plan = plan_megatron_blend(weights, requested);
  const double per_byte = spec.dataset_tokens / total_disk_bytes(spec);
  std::vector<LlamaDataRow> rows;
  for (size_t i = 0; i < spec.sources.size(); ++i) {
    LlamaDataRow r;
    r.source = spec.sources[i];
    r.samples = plan.target_samples[i];
    r.tokens = r.source.disk_gb * 1e9 * per_byte;
    const double trained = double(r.samples) * spec.seq_length;
    r.epochs = trained / r.tokens;
    r.tokens_per_byte = trained / r.source.paper_epochs / (r.source.disk_gb * 1e9);
    rows.push_back(r);
  }
  return rows;
}

int reproduce_llama_data(const std::string& spec_name, const std::string& csv, bool dry_run) {
  const std::string spec_path = find_spec_file(spec_name);
  if (spec_path.empty()) usage_error("spec '{}': no {}.toml in {}", spec_name, spec_name, fmt::join(spec_dirs(), ", "));
  const LlamaDataSpec spec = parse_llama_data_spec(read_regular_file(spec_path, "spec"), spec_path);
  const double per_byte = spec.dataset_tokens / total_disk_bytes(spec);
  fmt::print("llama-data: {}\nllama-data: {:.3g} training tokens = {} samples of {}, blended as Megatron does; "
             "every source at the dataset's {:.4f} tokens per byte ({:.3g} tokens over {:.0f} GB)\n",
             spec.title, spec.train_tokens, int64_t(std::ceil(spec.train_tokens / spec.seq_length)), spec.seq_length,
             per_byte, spec.dataset_tokens, total_disk_bytes(spec) / 1e9);
  if (dry_run) return 0;
  check_output_file(csv, "--out");
  const std::vector<LlamaDataRow> rows = llama_data_rows(spec);
  fmt::print("{:<14} {:>6} {:>9} {:>13} {:>9} {:>7} {:>7} {:>7}  {}\n", "source", "share", "disk GB", "samples",
             "tokens B", "epochs", "paper", "error", "tokens/byte the paper's epochs imply");
  const std::string sha = git_sha(), host = host_name(), when = utc_timestamp();
  std::string out =
      "source,proportion,disk_gb,samples,tokens,epochs,paper_epochs,error,implied_tokens_per_byte,git_sha,host,"
      "timestamp\n";
  double abs_error = 0;
  for (const LlamaDataRow& r : rows) {
    const double err = (r.epochs - r.source.paper_epochs) / r.source.paper_epochs;
    abs_error += std::fabs(err);
    fmt::print("{:<14} {:>5.1f}% {:>9.0f} {:>13} {:>9.1f} {:>7.2f} {:>7.2f} {:>+6.1f}%  {:.3f}\n", r.source.name,
               100 * r.source.proportion, r.source.disk_gb, r.samples, r.tokens / 1e9, r.epochs,
               r.source.paper_epochs, 100 * err, r.tokens_per_byte);
    out += fmt::format("{},{},{},{},{:.6g},{:.4f},{},{:.4f},{:.4f},{},{},{}\n", r.source.name, r.source.proportion,
                       r.source.disk_gb, r.samples, r.tokens, r.epochs, r.source.paper_epochs, err,
                       r.tokens_per_byte, sha, host, when);
  }
  fmt::print("llama-data: epochs {:.1f}% from the table on average (one tokens-per-byte for every source: the "
             "paper gives no per-source token counts; the last column is what each source would need)\n",
             100 * abs_error / double(rows.size()));
  write_user_file(csv, out);
  fmt::print("llama-data: {} rows in {}\n", rows.size(), csv);
  return 0;
}

}  // namespace ptdp
