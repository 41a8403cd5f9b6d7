#include <fmt/format.h>

#include "core/data/preprocess.h"
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

}  // namespace ptdp
