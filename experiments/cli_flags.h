// The flag groups of the CLI contract (MODEL, PARALLEL, RUN) bound to a RunConfig.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config/run_config.h"
#include "core/data/tokenizer.h"

namespace ptdp {

// The flags as parsed, before the preset and validation are applied: every field of the tables
// (core/config/config_fields.h) bound to its member of `run`, and the flags whose meaning needs more.
struct RunFlags {
  std::string model;                   // --model: the preset
  int query_groups = 0;                // --num-query-groups (with --group-query-attention)
  bool group_query_attention = false;  // --group-query-attention
  std::string recipe = "default";      // --recipe (experiments/recipe.h)
  // Megatron-LM's flags of experiments/megatron_flags.h.
  TokenizerOptions tokenizer;            // --tokenizer-type, --vocab-file, --merge-file, --tokenizer-model
  std::vector<std::string> data_path;    // --data-path: Megatron's words (a prefix, or weights and prefixes)
  int max_position_embeddings = 0;       // --max-position-embeddings
  std::string recompute_method;          // --recompute-method
  int recompute_num_layers = 0;          // --recompute-num-layers
  std::vector<int64_t> rampup_batch_size;  // --rampup-batch-size START INCREMENT SAMPLES
  std::string step_batch_size_schedule;    // --step-batch-size-schedule (Megatron's newer ramp)
  bool trains = true;                  // false for simulate: the optimizer flags and --recipe do not apply
  // The first enumerated flag given a name it does not have ("--precision 'x' must be f32, bf16 or
  // f16"): refused by resolve_run_config, where every rank of an MPI job refuses it together.
  std::string bad_choice;
  RunConfig run;
};

// Throws the UsageError of RunFlags::bad_choice, if any.
void check_choices(const RunFlags& f);

// --seed: a whole number in uint64 range; CLI::ValidationError "--seed TEXT must be ..." otherwise.
uint64_t parse_seed(const std::string& text);

// One field's flag, for a command that adds it alone (simulate's and plan's --stack).
void add_field_flag(CLI::App& app, const std::string& flag, RunFlags& f);
// The flags of the model, parallel and run (with optimizer) tables.
void add_model_flags(CLI::App& app, RunFlags& f);
void add_parallel_flags(CLI::App& app, RunFlags& f);
void add_run_flags(CLI::App& app, RunFlags& f);
// Applies the preset and the explicit model flags, then validate_run(); UsageError on bad input.
RunConfig resolve_run_config(const CLI::App& app, RunFlags& f);

}  // namespace ptdp
