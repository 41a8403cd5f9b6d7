// `ptdp preprocess`: a text file as a Megatron .bin/.idx dataset (byte-level, GPT-2 BPE or
// SentencePiece tokens).
#include <functional>
#include <memory>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/data/preprocess.h"
#include "core/data/tokenizer.h"
#include "experiments/commands.h"

namespace ptdp {

int cmd_preprocess(const std::string& input, const std::string& output_prefix, const PreprocessOptions& opts) {
  PreprocessStats st;
  preprocess_text(input, output_prefix, opts, &st);
  // The vocabulary is what `ptdp train --vocab-size` must cover.
  fmt::print("wrote {}.bin and {}.idx: {} document(s), {} tokens ({} tokenizer, vocabulary {}, {}{}), {} bytes\n",
             output_prefix, output_prefix, st.documents, st.tokens, st.tokenizer, st.vocab_size, st.dtype,
             opts.append_eod ? ", end-of-document id appended" : "", st.bytes_written);
  const bool gpt2 = tokenizer_kind(opts.tokenizer) == TokenizerKind::Gpt2Bpe;
  if (st.invalid_utf8_lines > 0)
    fmt::print(stderr, "ptdp: warning: {} line(s) of {} were not UTF-8 ({} byte(s)); {}\n", st.invalid_utf8_lines,
               input, st.invalid_utf8_bytes,
               gpt2 ? "each ill-formed sequence was encoded as U+FFFD (as Python's errors='replace')"
                    : "SentencePiece encoded those bytes as <unk> (or byte pieces under byte fallback)");
  if (gpt2 && st.inexact_cuts > 0)
    fmt::print(stderr,
               "ptdp: warning: {} cut(s) inside runs of letters, digits, punctuation or spaces longer than {} MiB; "
               "the tokens at a cut may differ from the whole text's\n",
               st.inexact_cuts, (8 * opts.max_encode_piece) >> 20);
  if (st.long_lines > 0)
    fmt::print("{} line(s) longer than {} MiB were encoded in pieces cut at spaces{}\n", st.long_lines,
               opts.max_encode_piece >> 20,
               st.inexact_cuts == 0 ? " (the same tokens as whole lines for this model)"
                                    : fmt::format("; {} cut(s) may differ from a whole-line encoding (no space to cut "
                                                  "at, or a model whose pieces cross spaces)",
                                                  st.inexact_cuts));
  return 0;
}

std::pair<CLI::App*, std::function<int()>> add_preprocess_command(CLI::App& app) {
  struct Flags {
    std::string input, prefix;
    PreprocessOptions opts;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* pre = app.add_subcommand(
      "preprocess", "text file -> Megatron .bin/.idx dataset (byte-level, GPT-2 BPE or SentencePiece tokens)");
  pre->add_option("--input", f->input, "text file")->required();
  pre->add_option("--output-prefix", f->prefix, "writes PREFIX.bin and PREFIX.idx")->required();
  const auto names_a = [](const char* what) {
    return CLI::Validator([what](std::string& v) { return v.empty() ? std::string("must name ") + what : ""; },
                          "FILE");
  };
  pre->add_option("--tokenizer-type", f->opts.tokenizer.type,
                  "GPT2BPETokenizer (GPT-2's byte-level BPE, with --vocab-file and --merge-file), or "
                  "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer (with --tokenizer-model); "
                  "default: SentencePiece with --tokenizer-model, else byte-level tokens")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() ? "must name a tokenizer type (" + known_tokenizer_types() + ")" : std::string();
          },
          "TYPE"));
  pre->add_option("--tokenizer-model", f->opts.tokenizer.model,
                  "SentencePiece .model file (e.g. LLaMA's tokenizer.model)")
      ->check(names_a("a .model file"));
  pre->add_option("--vocab-file", f->opts.tokenizer.vocab_file, "GPT-2's vocab.json (token -> id), for GPT2BPETokenizer")
      ->check(names_a("a vocab.json file"));
  pre->add_option("--merge-file", f->opts.tokenizer.merge_file, "GPT-2's merges.txt, for GPT2BPETokenizer")
      ->check(names_a("a merges.txt file"));
  pre->add_flag("--append-eod", f->opts.append_eod,
                "end the document with the tokenizer's end-of-document id (<|endoftext|>, or the SentencePiece "
                "model's eos; not for byte-level tokens)");
  pre->add_flag("--allow-invalid-utf8", f->opts.allow_invalid_utf8,
                "encode text that is not UTF-8 instead of refusing the file (SentencePiece turns such bytes into "
                "<unk>, GPT-2 BPE each ill-formed sequence into U+FFFD); the count is reported");
  return {pre, [f]() { return cmd_preprocess(f->input, f->prefix, f->opts); }};
}

}  // namespace ptdp
