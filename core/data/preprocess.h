// `ptdp preprocess`: turns a text file into a Megatron indexed dataset, a minimal stand-in for
// Megatron's tools/preprocess_data.py: byte-level tokens (no tokenizer needed) or a SentencePiece
// model's (--tokenizer-model, e.g. LLaMA's tokenizer.model).
#pragma once
#include <cstdint>
#include <string>

#include "core/data/tokenizer.h"

namespace ptdp {

struct PreprocessOptions {
  // --tokenizer-model: a SentencePiece .model file; empty = byte-level tokens.
  std::string tokenizer_model;
  // --append-eod: end the document with the tokenizer's end-of-document id (SentencePiece: the
  // model's eos). Refused for the byte-level tokenizer, whose 256 ids are all bytes.
  bool append_eod = false;
};

struct PreprocessStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes_written = 0;  // .bin plus .idx
  std::string tokenizer;       // Tokenizer::name(): "byte-level", "SentencePiece (tokenizer.model)"
  int64_t vocab_size = 0;      // the vocabulary --vocab-size must cover
  std::string dtype;           // token dtype of the .bin: "uint16" (vocabularies under 65500), "int32"
};

// Reads the whole of INPUT_PATH as ONE document (no splitting into documents or sentences) and
// writes OUTPUT_PREFIX.bin/.idx, with the token dtype Megatron picks for the tokenizer's
// vocabulary (token_dtype_for_vocab: uint16 under 65500 ids). Byte-level: one token per byte,
// streamed in 1 MiB pieces. SentencePiece: the file is encoded line by line as spm_encode does
// (a line's break is not a token; the model's normalisation applies), the lines' tokens
// concatenated. With append_eod the document ends with the eod id. The output appears
// atomically. Errors (UsageError), checked before anything is written: the output prefix's
// directory does not exist ("--output-prefix ..."); input missing, unreadable, not a regular
// file, empty or without a token ("--input FILE: ..."); the model file missing, not a
// SentencePiece model, or a build without SentencePiece ("--tokenizer-model FILE: ...");
// --append-eod with a tokenizer that has no end-of-document id. stats may be null.
void preprocess_text(const std::string& input_path, const std::string& output_prefix, const PreprocessOptions& opts,
                     PreprocessStats* stats);

// Byte-level, no end-of-document token: preprocess_text(input, prefix, {}, stats).
void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats);

}  // namespace ptdp
