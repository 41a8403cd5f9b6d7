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
  // --allow-invalid-utf8: encode lines that are not UTF-8 (SentencePiece turns their bytes into
  // <unk>, or byte pieces under byte fallback) instead of refusing the file; counted in the stats.
  bool allow_invalid_utf8 = false;
  // The most bytes of a line SentencePiece encodes at once (see below); smaller in tests.
  size_t max_encode_piece = size_t(1) << 20;
};

struct PreprocessStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes_written = 0;  // .bin plus .idx
  std::string tokenizer;       // Tokenizer::name(): "byte-level", "SentencePiece (tokenizer.model)"
  int64_t vocab_size = 0;      // the vocabulary --vocab-size must cover
  std::string dtype;           // token dtype of the .bin: "uint16" (vocabularies under 65500), "int32"
  // SentencePiece only: lines with bytes that are not UTF-8, and those bytes (allow_invalid_utf8).
  int64_t invalid_utf8_lines = 0, invalid_utf8_bytes = 0;
  // Lines longer than max_encode_piece, encoded in pieces; cuts that may change their tokens (no
  // space to cut at in the window, or a model whose pieces cross spaces).
  int64_t long_lines = 0, inexact_cuts = 0;
};

// max_encode_piece: SentencePiece's memory grows about 80 bytes per input byte, so longer lines are
// cut at a space between two words (Tokenizer::space_cut) and encoded a piece at a time.

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
