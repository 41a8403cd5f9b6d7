#include "core/common/regular_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/common/error.h"

namespace ptdp {

namespace {

// The type checks of require_regular_file, without opening the file.
void check_type(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symbolic links
  if (ec || !fs::exists(st)) {
    const std::string why = ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "No such file or directory";
    usage_error("{} {}: {}", what, path, why);
  }
  if (fs::is_directory(st)) usage_error("{} {}: is a directory, not a file", what, path);
  if (!fs::is_regular_file(st)) usage_error("{} {}: is not a regular file (a FIFO, socket or device)", what, path);
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  check_type(path, what);
  if (!std::ifstream(path, std::ios::binary)) usage_error("{} {}: cannot be opened: {}", what, path, std::strerror(errno));
}

std::string read_regular_file(const std::string& path, const std::string& what) {
  check_type(path, what);
  std::ifstream f(path, std::ios::binary);  // opened once: the check and the read
  if (!f) usage_error("{} {}: cannot be opened: {}", what, path, std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) usage_error("{} {}: cannot be read: {}", what, path, std::strerror(errno));
  return ss.str();
}

}  // namespace ptdp
