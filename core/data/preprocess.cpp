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

std::vector<int32_t> read_bytes_as_tokens(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) usage_error("--input {}: cannot open: No such file or directory", path);
  if (!fs::is_regular_file(status)) usage_error("--input {}: not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error("--input {}: cannot open: {}", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) usage_error("--input {}: read failed: {}", path, std::strerror(errno));
  if (bytes.empty()) usage_error("--input {}: file is empty (nothing to tokenize)", path);
  std::vector<int32_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
  return tokens;
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
  const std::vector<int32_t> tokens = read_bytes_as_tokens(input_path);
  IndexedDatasetWriter writer(output_prefix, token_dtype_for_vocab(kByteVocabSize));
  writer.add_document(tokens);
  writer.finalize();
  if (stats != nullptr) {
    stats->documents = writer.num_documents();
    stats->tokens = writer.num_tokens();
    stats->bytes_written = writer.bytes_written();
  }
}

}  // namespace ptdp
