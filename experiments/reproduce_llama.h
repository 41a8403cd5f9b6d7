// `ptdp reproduce llama`: LLaMA's four sizes (Touvron et al. 2023) at their training scale
// (experiments/specs/llama.toml): the planner's best PTD-P layout, its tokens/s per GPU and the days
// to train on the model's token budget, against the paper's one published throughput (65B).
#pragma once
#include <string>
#include <vector>

#include "core/sim/hardware.h"

namespace ptdp {

struct LlamaModelSpec {
  std::string model;  // a llama preset
  double tokens = 0;  // training tokens
};

struct LlamaSpec {
  std::string path, title;
  int gpus = 0, global_batch = 0;
  Precision precision = Precision::Bf16;
  StackKind stack = StackKind::Megatron2021;  // the software the runs are modelled with (core/sim/stack.h)
  std::vector<int> zero_modes;
  std::vector<LlamaModelSpec> models;
  std::string paper_model;          // the model the paper gives a throughput for
  double paper_tokens_per_gpu = 0;  // its tokens/s per GPU
};

// Parses llama.toml; UsageError naming the file and key on bad input.
LlamaSpec parse_llama_spec(const std::string& text, const std::string& path);

// `spec`: "llama" (experiments/specs/llama.toml) or a .toml path. Plans every model, prints the table and writes `csv` (rewritten: one row per model, mode
// simulate). `dry_run`: prints the requests only.
int reproduce_llama(const std::string& spec, const std::string& csv, const sim::HardwareProfile& hw,
                    bool dry_run);

}  // namespace ptdp
