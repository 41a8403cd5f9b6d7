// `ptdp preprocess`: turns a text file into a Megatron indexed dataset, a minimal stand-in for
// Megatron's tools/preprocess_data.py: byte-level tokens (no tokenizer needed), GPT-2's BPE
// (--tokenizer-type GPT2BPETokenizer --vocab-file vocab.json --merge-file merges.txt, the paper's
// tokenizer) or a SentencePiece model's (--tokenizer-model, e.g. LLaMA's tokenizer.model).
#pragma once
#include <cstdint>
#include <string>

#include "core/data/tokenizer.h"

namespace ptdp {

struct PreprocessOptions {
  // --tokenizer-type, --tokenizer-model, --vocab-file, --merge-file: empty, byte-level tokens.
  TokenizerOptions tokenizer;
  // --append-eod: end the document with the tokenizer's end-of-document id (SentencePiece: the
  // model's eos; GPT-2: <|endoftext|>). Refused for the byte-level tokenizer, whose 256 ids are all
  // bytes.
  bool append_eod = false;
  // --allow-invalid-utf8: encode text that is not UTF-8 instead of refusing the file; counted in
  // the stats. SentencePiece turns such bytes into <unk> (or byte pieces under byte fallback), GPT-2
  // BPE each maximal ill-formed subpart into U+FFFD, as Python's errors='replace' does.
  bool allow_invalid_utf8 = false;
  // The most bytes encoded at once (see below); smaller in tests.
  size_t max_encode_piece = size_t(1) << 20;
};

struct PreprocessStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes_written = 0;  // .bin plus .idx
  std::string tokenizer;       // Tokenizer::name(): "byte-level", "SentencePiece (tokenizer.model)", ...
  int64_t vocab_size = 0;      // the vocabulary --vocab-size must cover
  std::string dtype;           // token dtype of the .bin: "uint16" (vocabularies under 65500), "int32"
  // SentencePiece and GPT-2 BPE: lines with bytes that are not UTF-8, and those bytes
  // (allow_invalid_utf8).
  int64_t invalid_utf8_lines = 0, invalid_utf8_bytes = 0;
  // SentencePiece: lines longer than max_encode_piece, encoded in pieces. Both: cuts that may
  // change the tokens (SentencePiece: no space to cut at in the window, or a model whose pieces
  // cross spaces; GPT-2 BPE: one pre-tokenizer piece of 8 x max_encode_piece bytes).
  int64_t long_lines = 0, inexact_cuts = 0;
};

// max_encode_piece: SentencePiece's memory grows about 80 bytes per input byte, so longer lines are
// cut at a space between two words (Tokenizer::space_cut) and encoded a piece at a time. GPT-2 BPE
// encodes what it has read once it holds max_encode_piece bytes, up to the last place where the
// pre-tokenizer cuts whatever follows (Tokenizer::encode_head): the ids are exactly those of the
// whole file; only a text with no such place in 8 x max_encode_piece bytes (one run of letters,
// digits, punctuation or spaces that long) is cut there anyway, counted in inexact_cuts.

// Reads the whole of INPUT_PATH as ONE document (no splitting into documents or sentences) and
// writes OUTPUT_PREFIX.bin/.idx, with the token dtype Megatron picks for the tokenizer's
// vocabulary (token_dtype_for_vocab: uint16 under 65500 ids). Byte-level: one token per byte,
// streamed in 1 MiB pieces. GPT-2 BPE: the file is one text (line breaks are tokens), with the ids
// transformers' GPT2Tokenizer gives for the whole file; text that is not UTF-8 is refused naming
// its byte offset, unless allow_invalid_utf8. SentencePiece: the file is encoded line by line as
// spm_encode does (a line's break is not a token; the model's normalisation applies), the lines'
// tokens concatenated. With append_eod the document ends with the eod id. The output appears
// atomically. Errors (UsageError), checked before anything is written: the output prefix's
// directory does not exist ("--output-prefix ..."); input missing, unreadable, not a regular
// file, empty or without a token ("--input FILE: ..."); tokenizer flags that do not go together
// (tokenizer_kind); a tokenizer file missing or not what its flag reads, or a build without the
// tokenizer's library ("--tokenizer-model FILE: ...", "--vocab-file FILE: ...", ...);
// --append-eod with a tokenizer that has no end-of-document id. stats may be null.
void preprocess_text(const std::string& input_path, const std::string& output_prefix, const PreprocessOptions& opts,
                     PreprocessStats* stats);

// Byte-level, no end-of-document token: preprocess_text(input, prefix, {}, stats).
void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats);

}  // namespace ptdp
