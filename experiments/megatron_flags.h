// Megatron-LM's flags beyond ptdp's configuration fields, as its example scripts give them
// (examples/gpt3/train_gpt3_175b_distributed.sh, examples/sc21): the tokenizer that sets the
// vocabulary size, --data-path's list of separate words, and flags that ptdp honours as they are
// or refuses, each refusal saying why (docs/ROBUSTNESS.md).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

#include "experiments/cli_flags.h"

namespace ptdp {

// Adds the flags to a command of RunFlags (train, simulate).
void add_megatron_flags(CLI::App& app, RunFlags& f);
// The vocabulary of the tokenizer the flags name (--tokenizer-type, --vocab-file, --merge-file,
// --tokenizer-model), 0 when none is named. With --vocab-file and --merge-file and no
// --tokenizer-type (the GPT-3 script's way), GPT2BPETokenizer. UsageError naming a flag or file.
int64_t megatron_tokenizer_vocab(const RunFlags& f);
// Applies the flags to the resolved configuration, or refuses them: --data-path's list (and
// Megatron's sample order unless --data-order is given), --max-position-embeddings,
// --attention-backend, --recompute-method, --recompute-num-layers, --rampup-batch-size,
// --step-batch-size-schedule (the last two refused).
void apply_megatron_flags(const RunFlags& f, const std::function<bool(const char*)>& given, RunConfig& r);

}  // namespace ptdp
