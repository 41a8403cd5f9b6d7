#include "core/data/preprocess.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/common/error.h"
#include "core/common/utf8.h"
#include "core/data/indexed_dataset_writer.h"
#include "core/data/token_dtype.h"

namespace ptdp {
namespace {

// Opens the input: a regular file, readable.
std::ifstream open_input(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) usage_error("--input {}: cannot open: No such file or directory", path);
  if (!fs::is_regular_file(status)) usage_error("--input {}: not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error("--input {}: cannot open: {}", path, std::strerror(errno));
  return in;
}

// What the encoders below share: where the tokens go, written in batches of about 1 Mi.
struct TokenSink {
  TokenSink(const std::string& input_path, const Tokenizer& tok, IndexedDatasetWriter& w,
            const PreprocessOptions& opts, PreprocessStats& st)
      : path_(input_path), tok_(tok), w_(w), opts_(opts), st_(st) {}

  // Writes the tokens held when `always`, or when a batch is full.
  void flush(bool always) {
    if (always || tokens_.size() >= (1u << 20)) {
      w_.append_tokens(tokens_);
      tokens_.clear();
    }
  }

  const std::string& path_;
  const Tokenizer& tok_;
  IndexedDatasetWriter& w_;
  const PreprocessOptions& opts_;
  PreprocessStats& st_;
  std::vector<int32_t> tokens_;
};

// Byte-level: each block as it is read (every byte is a token on its own), so memory stays flat
// whatever the input's size.
class PieceEncoder : TokenSink {
 public:
  using TokenSink::TokenSink;
  void feed(std::string_view bytes) {
    tok_.encode(bytes, tokens_);
    flush(true);
  }
  void finish() {}
};

// SentencePiece: one line at a time, without its '\n' (as spm_encode reads its input), read in
// 1 MiB blocks; a line longer than max_encode_piece is encoded in pieces cut at a single space
// between two words, as the model's space_cut() allows, so memory stays bounded whatever the
// line's length. Lines that are not UTF-8 are refused (or counted, allow_invalid_utf8). Tokens
// are written in batches of about 1 Mi.
class LineEncoder : TokenSink {
 public:
  using TokenSink::TokenSink;

  // Feeds bytes of the file in order.
  void feed(std::string_view bytes) {
    while (!bytes.empty()) {
      const size_t nl = bytes.find('\n');
      line_.append(bytes.substr(0, nl));
      if (nl == std::string_view::npos) {
        while (line_.size() > opts_.max_encode_piece) cut_long_line();
        return;
      }
      end_line();
      bytes.remove_prefix(nl + 1);
    }
  }

  void finish() {
    if (!line_.empty()) end_line();
    flush(true);
  }

 private:
  void end_line() {
    encode(line_);
    if (offset_ > 0) ++st_.long_lines;
    line_.clear();
    offset_ = 0;
    counted_invalid_ = false;
    ++line_no_;
  }

  // Encodes a head of the line and keeps the rest.
  void cut_long_line() {
    const Tokenizer::SpaceCut mode = tok_.space_cut();
    size_t cut = std::string::npos;
    for (size_t p = opts_.max_encode_piece; p > opts_.max_encode_piece / 2; --p)
      if (line_[p] == ' ' && !std::isspace(static_cast<unsigned char>(line_[p - 1])) &&
          !std::isspace(static_cast<unsigned char>(line_[p + 1]))) {
        cut = p;
        break;
      }
    size_t drop = 0;
    if (cut == std::string::npos || mode == Tokenizer::SpaceCut::None) ++st_.inexact_cuts;
    if (cut == std::string::npos) {  // a word longer than half the window: cut at a character boundary
      cut = opts_.max_encode_piece;
      while (cut > 0 && (static_cast<unsigned char>(line_[cut]) & 0xC0) == 0x80) --cut;
    } else if (mode != Tokenizer::SpaceCut::Keep) {
      drop = 1;
    }
    encode(std::string_view(line_).substr(0, cut));
    line_.erase(0, cut + drop);
    offset_ += cut + drop;
  }

  void encode(std::string_view piece) {
    for (size_t at = first_invalid_utf8(piece); at != std::string_view::npos;) {
      if (!opts_.allow_invalid_utf8)
        usage_error("--input {}: line {} is not UTF-8 (byte 0x{:02x} at byte {} of the line; Latin-1 text?): "
                    "SentencePiece would encode such bytes as <unk>; convert the file (e.g. iconv -f latin1 -t utf-8) "
                    "or pass --allow-invalid-utf8",
                    path_, line_no_, static_cast<unsigned char>(piece[at]), offset_ + at + 1);
      if (!counted_invalid_) ++st_.invalid_utf8_lines;
      counted_invalid_ = true;
      ++st_.invalid_utf8_bytes;
      const size_t next = first_invalid_utf8(piece.substr(at + 1));
      at = next == std::string_view::npos ? next : at + 1 + next;
    }
    try {
      tok_.encode(piece, tokens_);
    } catch (const UsageError& e) {
      usage_error("{} (line {} of --input {})", e.what(), line_no_, path_);
    }
    flush(false);
  }

  std::string line_;       // the current line from offset_ on
  size_t offset_ = 0;      // bytes of the current line already encoded
  int64_t line_no_ = 1;
  bool counted_invalid_ = false;
};

// Reads the input in blocks of `block_size` bytes and feeds them to `enc` (PieceEncoder,
// LineEncoder, TextEncoder).
template <class Encoder>
void feed_blocks(std::ifstream& in, const std::string& input_path, size_t block_size, Encoder& enc) {
  std::vector<char> block(block_size);
  while (in) {
    in.read(block.data(), std::streamsize(block.size()));
    enc.feed(std::string_view(block.data(), size_t(in.gcount())));
  }
  if (in.bad()) usage_error("--input {}: read failed: {}", input_path, std::strerror(errno));
  enc.finish();
}

// GPT-2 BPE: the whole file as one text (line breaks are tokens). The bytes read are checked to be
// UTF-8 (a sequence cut by the end of a block waits for the next), then kept until there are
// max_encode_piece of them; then the tokenizer encodes the head whose ids do not depend on what
// follows (Tokenizer::encode_head) and the rest waits for more. So the ids are the whole file's
// and memory stays bounded; only when 8 x max_encode_piece bytes hold no such head (a single
// pre-tokenizer piece that long) are they encoded as they are, a cut counted as inexact.
class TextEncoder : TokenSink {
 public:
  using TokenSink::TokenSink;

  void feed(std::string_view bytes) {
    if (tail_.empty()) {
      tail_.assign(bytes.substr(check(bytes, false)));
    } else {
      tail_.append(bytes);
      tail_.erase(0, check(tail_, false));
    }
    while (text_.size() >= opts_.max_encode_piece) {
      size_t used = tok_.encode_head(text_, tokens_);
      if (used == 0) {
        if (text_.size() < 8 * opts_.max_encode_piece) break;
        tok_.encode(text_, tokens_);  // text_ ends with a whole character
        used = text_.size();
        ++st_.inexact_cuts;
      }
      text_.erase(0, used);
      flush(false);
    }
  }

  void finish() {
    check(tail_, true);
    tok_.encode(text_, tokens_);
    flush(true);
  }

 private:
  // Appends the UTF-8 text of `in` to text_ (each maximal ill-formed subpart as U+FFFD when
  // allowed) and returns how much of it was taken: all but a sequence that the end of the block
  // cut, unless at_end.
  size_t check(std::string_view in, bool at_end) {
    if (!at_end) in.remove_suffix(utf8_cut_tail(in));
    size_t i = 0, run = 0;
    while (i < in.size()) {
      const auto c = static_cast<unsigned char>(in[i]);
      if (c < 0x80) {
        line_ += c == '\n';
        ++i;
        continue;
      }
      if (const size_t n = utf8_sequence_length(in.substr(i))) {
        i += n;
        continue;
      }
      const size_t bad = utf8_maximal_subpart(in.substr(i));
      if (!opts_.allow_invalid_utf8)
        usage_error("--input {}: not UTF-8 at byte offset {} (line {}: byte 0x{:02x}; Latin-1 text?): GPT-2 BPE reads "
                    "UTF-8 text; convert the file (e.g. iconv -f latin1 -t utf-8) or pass --allow-invalid-utf8 to "
                    "encode each ill-formed sequence as U+FFFD, as Python's errors='replace' does",
                    path_, offset_ + i, line_, c);
      if (line_ != last_invalid_line_) ++st_.invalid_utf8_lines;
      last_invalid_line_ = line_;
      st_.invalid_utf8_bytes += int64_t(bad);
      text_.append(in.substr(run, i - run)).append(kUtf8Replacement);
      i += bad;
      run = i;
    }
    text_.append(in.substr(run, i - run));
    offset_ += i;
    return i;
  }

  std::string tail_;  // bytes read but not yet checked
  std::string text_;  // checked UTF-8 text, not yet encoded
  uint64_t offset_ = 0;  // of the first byte not yet checked, in the file
  int64_t line_ = 1, last_invalid_line_ = 0;
};

}  // namespace

void preprocess_text(const std::string& input_path, const std::string& output_prefix, const PreprocessOptions& opts,
                     PreprocessStats* stats) {
  namespace fs = std::filesystem;
  PTDP_CHECK(opts.max_encode_piece >= 16, "max_encode_piece {} is too small", opts.max_encode_piece);
  if (output_prefix.empty() || output_prefix.back() == '/')
    usage_error("--output-prefix '{}': must name a file prefix, e.g. data/corpus", output_prefix);
  const fs::path dir = fs::path(output_prefix).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec))
    usage_error("--output-prefix {}: directory {} does not exist", output_prefix, dir.string());
  std::ifstream in = open_input(input_path);
  const TokenizerKind kind = tokenizer_kind(opts.tokenizer);
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(opts.tokenizer);
  if (opts.append_eod && tok->eod_id() < 0) {
    if (kind == TokenizerKind::Bytes)
      usage_error("--append-eod: the byte-level tokenizer has no end-of-document id (its 256 ids are all bytes); "
                  "use it with --tokenizer-model or --tokenizer-type GPT2BPETokenizer");
    if (kind == TokenizerKind::Gpt2Bpe)
      usage_error("--append-eod: --vocab-file {} has no <|endoftext|> token (GPT-2's end of document)",
                  opts.tokenizer.vocab_file);
    usage_error("--append-eod: tokenizer model {} has no end-of-document (eos) id", opts.tokenizer.model);
  }
  const TokenDType dtype = token_dtype_for_vocab(tok->vocab_size());
  IndexedDatasetWriter writer(output_prefix, dtype);
  PreprocessStats local;
  PreprocessStats& st = stats != nullptr ? *stats : local;
  if (kind == TokenizerKind::Gpt2Bpe) {
    TextEncoder enc(input_path, *tok, writer, opts, st);
    feed_blocks(in, input_path, std::min(opts.max_encode_piece, size_t(1) << 20), enc);
  } else if (tok->encodes_lines()) {
    LineEncoder enc(input_path, *tok, writer, opts, st);
    feed_blocks(in, input_path, size_t(1) << 20, enc);
  } else {
    PieceEncoder enc(input_path, *tok, writer, opts, st);
    feed_blocks(in, input_path, size_t(1) << 20, enc);
  }
  if (writer.num_tokens() == 0) {
    if (fs::file_size(input_path, ec) == 0 || ec)
      usage_error("--input {}: file is empty (nothing to tokenize)", input_path);
    usage_error("--input {}: {} gives no token for this file (only blank lines?)", input_path, tok->name());
  }
  if (opts.append_eod) writer.append_tokens(std::vector<int32_t>{tok->eod_id()});
  writer.end_document();
  writer.finalize();
  st.documents = writer.num_documents();
  st.tokens = writer.num_tokens();
  st.bytes_written = writer.bytes_written();
  st.tokenizer = tok->name();
  st.vocab_size = tok->vocab_size();
  st.dtype = std::string(token_dtype_name(dtype));
}

void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats) {
  preprocess_text(input_path, output_prefix, PreprocessOptions{}, stats);
}

}  // namespace ptdp
