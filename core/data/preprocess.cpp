#include "core/data/preprocess.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/common/error.h"
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

// Byte-level: streamed in 1 MiB pieces, so memory stays flat whatever the input's size.
void write_pieces(std::ifstream& in, const std::string& input_path, const Tokenizer& tok, IndexedDatasetWriter& w) {
  std::vector<char> bytes(1 << 20);
  std::vector<int32_t> tokens;
  for (;;) {
    in.read(bytes.data(), std::streamsize(bytes.size()));
    const size_t n = size_t(in.gcount());
    if (in.bad()) usage_error("--input {}: read failed: {}", input_path, std::strerror(errno));
    if (n == 0) break;
    tokens.clear();
    tok.encode(std::string_view(bytes.data(), n), tokens);
    w.append_tokens(tokens);
  }
}

// SentencePiece: one line at a time, without its '\n' (as spm_encode reads its input); tokens are
// written in batches of about 1 Mi.
void write_lines(std::ifstream& in, const std::string& input_path, const Tokenizer& tok, IndexedDatasetWriter& w) {
  std::string line;
  std::vector<int32_t> tokens;
  while (std::getline(in, line)) {
    tok.encode(line, tokens);
    if (tokens.size() >= (1u << 20)) {
      w.append_tokens(tokens);
      tokens.clear();
    }
  }
  if (in.bad()) usage_error("--input {}: read failed: {}", input_path, std::strerror(errno));
  w.append_tokens(tokens);
}

}  // namespace

void preprocess_text(const std::string& input_path, const std::string& output_prefix, const PreprocessOptions& opts,
                     PreprocessStats* stats) {
  namespace fs = std::filesystem;
  if (output_prefix.empty() || output_prefix.back() == '/')
    usage_error("--output-prefix '{}': must name a file prefix, e.g. data/corpus", output_prefix);
  const fs::path dir = fs::path(output_prefix).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec))
    usage_error("--output-prefix {}: directory {} does not exist", output_prefix, dir.string());
  std::ifstream in = open_input(input_path);
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(opts.tokenizer_model);
  if (opts.append_eod && tok->eod_id() < 0) {
    if (opts.tokenizer_model.empty())
      usage_error("--append-eod: the byte-level tokenizer has no end-of-document id (its 256 ids are all bytes); "
                  "use it with --tokenizer-model");
    usage_error("--append-eod: tokenizer model {} has no end-of-document (eos) id", opts.tokenizer_model);
  }
  const TokenDType dtype = token_dtype_for_vocab(tok->vocab_size());
  IndexedDatasetWriter writer(output_prefix, dtype);
  if (tok->encodes_lines()) write_lines(in, input_path, *tok, writer);
  else write_pieces(in, input_path, *tok, writer);
  if (writer.num_tokens() == 0) {
    if (fs::file_size(input_path, ec) == 0 || ec)
      usage_error("--input {}: file is empty (nothing to tokenize)", input_path);
    usage_error("--input {}: {} gives no token for this file (only blank lines?)", input_path, tok->name());
  }
  if (opts.append_eod) writer.append_tokens(std::vector<int32_t>{tok->eod_id()});
  writer.end_document();
  writer.finalize();
  if (stats != nullptr) {
    stats->documents = writer.num_documents();
    stats->tokens = writer.num_tokens();
    stats->bytes_written = writer.bytes_written();
    stats->tokenizer = tok->name();
    stats->vocab_size = tok->vocab_size();
    stats->dtype = std::string(token_dtype_name(dtype));
  }
}

void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats) {
  preprocess_text(input_path, output_prefix, PreprocessOptions{}, stats);
}

}  // namespace ptdp
