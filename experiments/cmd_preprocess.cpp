#include <fmt/format.h>

#include "core/data/preprocess.h"
#include "experiments/commands.h"

namespace ptdp {

int cmd_preprocess(const std::string& input, const std::string& output_prefix) {
  PreprocessStats st;
  preprocess_text(input, output_prefix, &st);
  fmt::print("wrote {}.bin and {}.idx: {} document(s), {} byte-level tokens (vocabulary {}), {} bytes\n",
             output_prefix, output_prefix, st.documents, st.tokens, kByteVocabSize, st.bytes_written);
  return 0;
}

}  // namespace ptdp
