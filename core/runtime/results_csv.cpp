#include "core/runtime/results_csv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/common/error.h"

namespace ptdp {

const std::vector<std::string>& result_columns() {
  static const std::vector<std::string> cols = {
      "experiment", "mode", "backend", "comm", "precision", "model", "params", "layers", "hidden",
      "heads", "seq_length", "vocab_size", "gpus", "tp", "pp", "dp", "vpp", "micro_batch",
      "global_batch", "num_microbatches", "schedule", "recompute", "scatter_gather", "iters",
      "iter_time_ms", "tflops_per_gpu", "pct_peak", "tokens_per_s", "seq_per_s", "bubble_fraction",
      "peak_mem_gb", "loss", "git_sha", "host", "device", "timestamp",
      // beyond the contract:
      "model_tflops_per_gpu", "fwd_ms", "bwd_ms", "p2p_wait_ms", "dp_ms", "optimizer_ms", "p2p_bytes",
      "activation_gb"};
  return cols;
}

namespace {
size_t column_index(const std::string& c) {
  const auto& cols = result_columns();
  for (size_t i = 0; i < cols.size(); ++i)
    if (cols[i] == c) return i;
  PTDP_CHECK(false, "no result column named {}", c);
  return 0;
}

std::string quote(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string r = "\"";
  for (char ch : v) r += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return r + "\"";
}

std::string header_line() {
  std::string h;
  for (const auto& c : result_columns()) h += (h.empty() ? "" : ",") + c;
  return h;
}
}  // namespace

void ResultRow::set(const std::string& column, const std::string& value) { values_[column_index(column)] = value; }
void ResultRow::set(const std::string& column, double value) { values_[column_index(column)] = fmt::format("{:.6g}", value); }
void ResultRow::set(const std::string& column, long long value) { values_[column_index(column)] = std::to_string(value); }
const std::string& ResultRow::get(const std::string& column) const { return values_[column_index(column)]; }

std::string ResultRow::to_csv_line() const {
  std::string line;
  for (size_t i = 0; i < values_.size(); ++i) line += (i ? "," : "") + quote(values_[i]);
  return line;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + p.filename().string() + ".tmpXXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw RuntimeError(fmt::format("{}: cannot create a temporary file: {}", path, std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw RuntimeError(fmt::format("{}: write failed: {}", path, std::strerror(e)));
    }
    done += static_cast<size_t>(w);
  }
  fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    throw RuntimeError(fmt::format("{}: flush failed: {}", path, std::strerror(errno)));
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmpl.c_str());
    throw RuntimeError(fmt::format("{}: rename failed: {}", path, std::strerror(e)));
  }
}

namespace {
std::string first_line_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  std::getline(in, first);
  if (!first.empty() && first.back() == '\r') first.pop_back();
  return first;
}
}  // namespace

void check_result_csv(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) usage_error("{} {}: directory {} does not exist", flag, path, dir.string());
  if (::access(dir.c_str(), W_OK) != 0) usage_error("{} {}: directory {} is not writable", flag, path, dir.string());
  if (fs::is_directory(p, ec)) usage_error("{} {}: is a directory, not a CSV file", flag, path);
  if (fs::exists(p, ec) && first_line_of(path) != header_line())
    usage_error("{} {}: exists but its header is not the result CSV header; choose another file", flag, path);
}

void append_result_rows(const std::string& path, const std::vector<ResultRow>& rows) {
  std::string content;
  if (std::filesystem::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    content = ss.str();
    if (first_line_of(path) != header_line())
      throw UsageError(fmt::format("{}: exists but its header is not the result CSV header; "
                                   "choose another --csv file", path));
    if (!content.empty() && content.back() != '\n') content += '\n';
  } else {
    content = header_line() + "\n";
  }
  for (const auto& r : rows) content += r.to_csv_line() + "\n";
  write_file_atomic(path, content);
}

}  // namespace ptdp
