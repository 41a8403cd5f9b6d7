#include "experiments/megatron_flags.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/common/error.h"
#include "core/common/one_line.h"

namespace ptdp {

void add_megatron_flags(CLI::App& app, RunFlags& f) {
  app.add_option("--data-path", f.data_path,
                 "Megatron's --data-path: a dataset PREFIX, or 'W1 PREFIX1 W2 PREFIX2 ...' / 'PREFIX1 PREFIX2 ...' as "
                 "separate words (one quoted word works too); Megatron-core's sample order unless --data-order says "
                 "otherwise")
      ->expected(1, -1);
  app.add_option("--tokenizer-type", f.tokenizer.type,
                 "the tokenizer whose vocabulary sets --vocab-size, as Megatron's: GPT2BPETokenizer (with --vocab-file "
                 "and --merge-file; the default when both are given), SentencePieceTokenizer, "
                 "GPTSentencePieceTokenizer or Llama2Tokenizer (with --tokenizer-model)");
  app.add_option("--vocab-file", f.tokenizer.vocab_file, "GPT-2's vocab.json: the vocabulary size (Megatron's flag)");
  app.add_option("--merge-file", f.tokenizer.merge_file, "GPT-2's merges.txt (Megatron's flag)");
  app.add_option("--tokenizer-model", f.tokenizer.model,
                 "a SentencePiece .model file: the vocabulary size (Megatron's flag)");
  app.add_option("--max-position-embeddings", f.max_position_embeddings,
                 "Megatron's position table size: at least --seq-length; gpt's learned table has --seq-length rows, so "
                 "it must equal --seq-length (llama: rotary, no table)");
  app.add_option("--recompute-method", f.recompute_method,
                 "with --recompute full: uniform (ptdp recomputes each layer on its own, Megatron's uniform with "
                 "--recompute-num-layers 1); block is refused");
  app.add_option("--recompute-num-layers", f.recompute_num_layers,
                 "with --recompute-method uniform: layers per recomputed unit; ptdp's unit is one layer");
  app.add_option("--rampup-batch-size", f.rampup_batch_size,
                 "Megatron's batch-size ramp START INCREMENT SAMPLES: refused (ptdp trains every iteration at "
                 "--global-batch-size)")
      ->expected(3);
  app.add_option("--step-batch-size-schedule", f.step_batch_size_schedule,
                 "Megatron's stepped batch-size schedule ('0:16 2.4B:320 ...'): refused (ptdp trains every iteration "
                 "at --global-batch-size)");
}

int64_t megatron_tokenizer_vocab(const RunFlags& f) {
  TokenizerOptions o = f.tokenizer;
  if (o.type.empty() && o.model.empty() && o.vocab_file.empty() && o.merge_file.empty()) return 0;
  if (o.type.empty() && !o.vocab_file.empty() && !o.merge_file.empty()) o.type = "GPT2BPETokenizer";
  tokenizer_kind(o);  // the combination's rules, before any file is read
  return make_tokenizer(o)->vocab_size();
}

namespace {

// --data-path's words as ptdp's --data (one text, words separated by spaces).
void apply_data_path(const RunFlags& f, const std::function<bool(const char*)>& given, RunConfig& r) {
  if (!given("--data-path")) return;
  if (given("--data"))
    usage_error("--data and --data-path name the same setting (--data-path is Megatron's): give one of them");
  std::string words;
  for (const std::string& w : f.data_path) {
    if (w.find_first_not_of(" \t") == std::string::npos)
      usage_error("--data-path '{}': needs a dataset prefix (or weights and prefixes)", one_line(w));
    words += (words.empty() ? "" : " ") + w;
  }
  r.data = words;
  if (!given("--data-order")) r.data_order = DataOrder::Megatron;  // Megatron's flag, Megatron's order
}

void check_position_embeddings(const RunFlags& f, const RunConfig& r) {
  const int n = f.max_position_embeddings, s = r.model.seq_length;
  if (n < s)
    usage_error("--max-position-embeddings {} must be at least --seq-length {} (as in Megatron-LM)", n, s);
  if (r.model.arch == Arch::Gpt && n != s)
    usage_error("--max-position-embeddings {}: ptdp's gpt has a learned position table of --seq-length {} rows; a "
                "larger table (rows no sequence reaches) is not built: give --seq-length {} or leave the flag out",
                n, s, s);
}

void check_recompute(const RunFlags& f, const std::function<bool(const char*)>& given, const RunConfig& r) {
  if (given("--recompute-method")) {
    if (f.recompute_method != "uniform" && f.recompute_method != "block")
      usage_error("--recompute-method '{}' must be uniform or block", one_line(f.recompute_method));
    if (r.par.recompute != Recompute::Full)
      usage_error("--recompute-method {} needs --recompute-granularity full (as in Megatron-LM)", f.recompute_method);
    if (f.recompute_method == "block")
      usage_error("--recompute-method block: ptdp recomputes every layer (Megatron's uniform with "
                  "--recompute-num-layers 1), not the first N layers of each stage; give uniform");
  }
  if (given("--recompute-num-layers")) {
    if (!given("--recompute-method"))
      usage_error("--recompute-num-layers {} needs --recompute-method uniform (as in Megatron-LM)",
                  f.recompute_num_layers);
    if (f.recompute_num_layers != 1)
      usage_error("--recompute-num-layers {}: ptdp recomputes each layer on its own (units of 1 layer); give 1",
                  f.recompute_num_layers);
  }
}

// Megatron's batch-size ramps: --rampup-batch-size, and --step-batch-size-schedule that replaced it.
void check_rampup(const std::string& flag_and_value) {
  usage_error("{}: ptdp trains every iteration at --global-batch-size (its pipeline schedules and data positions "
              "are built for one batch size); leave the ramp out",
              flag_and_value);
}

}  // namespace

void apply_megatron_flags(const RunFlags& f, const std::function<bool(const char*)>& given, RunConfig& r) {
  apply_data_path(f, given, r);
  if (given("--max-position-embeddings")) check_position_embeddings(f, r);
  check_recompute(f, given, r);
  if (given("--rampup-batch-size"))
    check_rampup(fmt::format("--rampup-batch-size {}", fmt::join(f.rampup_batch_size, " ")));
  if (given("--step-batch-size-schedule"))
    check_rampup(fmt::format("--step-batch-size-schedule '{}'", one_line(f.step_batch_size_schedule)));
}

}  // namespace ptdp
