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

}  // namespace

void preprocess_text(const std::string& input_path, const std::string& output_prefix, PreprocessStats* stats) {
  namespace fs = std::filesystem;
  if (output_prefix.empty() || output_prefix.back() == '/')
    usage_error("--output-prefix '{}': must name a file prefix, e.g. data/corpus", output_prefix);
  const fs::path dir = fs::path(output_prefix).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec))
    usage_error("--output-prefix {}: directory {} does not exist", output_prefix, dir.string());
  std::ifstream in = open_input(input_path);
  IndexedDatasetWriter writer(output_prefix, token_dtype_for_vocab(kByteVocabSize));
  // Streamed in 1 MiB pieces: memory stays flat whatever the input's size.
  std::vector<char> bytes(1 << 20);
  std::vector<int32_t> tokens;
  for (;;) {
    in.read(bytes.data(), std::streamsize(bytes.size()));
    const size_t n = size_t(in.gcount());
    if (in.bad()) usage_error("--input {}: read failed: {}", input_path, std::strerror(errno));
    if (n == 0) break;
    tokens.resize(n);
    for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
    writer.append_tokens(tokens);
  }
  if (writer.num_tokens() == 0) usage_error("--input {}: file is empty (nothing to tokenize)", input_path);
  writer.end_document();
  writer.finalize();
  if (stats != nullptr) {
    stats->documents = writer.num_documents();
    stats->tokens = writer.num_tokens();
    stats->bytes_written = writer.bytes_written();
  }
}

}  // namespace ptdp
