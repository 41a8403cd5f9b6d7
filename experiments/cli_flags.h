// The flag groups of the CLI contract (MODEL, PARALLEL, RUN) bound to a RunConfig.
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "core/config/run_config.h"

namespace ptdp {

// Raw flag values before presets and validation are applied.
struct RunFlags {
  std::string model;
  std::string arch;  // empty: the preset's (gpt without --model)
  int layers = 0, hidden = 0, heads = 0, seq_length = 0;
  int query_groups = 0, ffn_hidden_size = 0;  // --num-query-groups (with --group-query-attention), --ffn-hidden-size
  bool group_query_attention = false;
  double norm_eps = 0;                        // --norm-epsilon
  long long vocab_size = 0;
  int vocab_divisible = 128;
  std::string recompute = "none";
  bool scatter_gather = true;
  std::string recipe = "default";  // --recipe (experiments/recipe.h)
  bool trains = true;              // false for simulate: the optimizer flags and --recipe do not apply
  RunConfig run;
};

// --seed: a whole number in uint64 range; CLI::ValidationError "--seed TEXT must be ..." otherwise.
uint64_t parse_seed(const std::string& text);

void add_model_flags(CLI::App& app, RunFlags& f);
void add_parallel_flags(CLI::App& app, RunFlags& f);
void add_run_flags(CLI::App& app, RunFlags& f);
// Applies the preset and the explicit model flags, then validate_run(); UsageError on bad input.
RunConfig resolve_run_config(const CLI::App& app, RunFlags& f);

}  // namespace ptdp
