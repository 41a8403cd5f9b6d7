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
  return 0;
}

}  // namespace ptdp
