// `ptdp preprocess`: turns a text file into a Megatron indexed dataset with byte-level tokens,
// a minimal stand-in for Megatron's tools/preprocess_data.py that needs no tokenizer.
#pragma once
#include <cstdint>
#include <string>

namespace ptdp {

// Vocabulary of the byte-level tokenizer: token = byte value, 0..255.
inline constexpr int64_t kByteVocabSize = 256;

struct PreprocessStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes_written = 0;  // .bin plus .idx
};

// Reads the whole of INPUT_PATH as ONE document (no splitting into lines or sentences, no
// end-of-document token), one token per byte, and writes OUTPUT_PREFIX.bin/.idx with the
// uint16 token dtype, as Megatron picks for vocabularies under 65500. The output appears
// atomically. Errors (UsageError): input missing, unreadable, not a regular file or empty
// ("--input FILE: ..."); the output prefix's directory does not exist ("--output-prefix ...").
// stats may be null.
void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats);

}  // namespace ptdp
