// What the libFuzzer targets (*_fuzz.cpp, scripts/fuzz.sh) share: scratch files in a folder
// private to the process, the report of a finding, and the one-line error contract.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace ptdp::fuzz {

// Reports a finding and stops the run; libFuzzer then saves the input as a crash-* artefact.
[[noreturn]] inline void finding(const char* what, std::string_view msg) {
  std::fprintf(stderr, "FINDING: %s: %.*s\n", what, static_cast<int>(msg.size()), msg.data());
  std::abort();
}

// The path of `name` in a folder private to this process (libFuzzer may run several jobs),
// made on first use and removed with its files at exit. The folder's name lives in a static
// buffer: an atexit handler runs after the destructors of function statics made later.
inline std::string scratch_path(std::string_view name) {
  static char dir[64];
  if (dir[0] == '\0') {
    std::strcpy(dir, "/tmp/ptdp_fuzz.XXXXXX");
    if (!::mkdtemp(dir)) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
  }
  return std::string(dir) + "/" + std::string(name);
}

// Writes `size` bytes to `path`; an I/O error is the harness's, not a finding: abort.
inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// The error contract: a UsageError message is one line and contains `must_name` (the file, or
// "--" for a flag).
inline void check_usage_message(std::string_view msg, std::string_view must_name) {
  if (msg.find(must_name) == std::string_view::npos) finding("UsageError without the file or flag name", msg);
  if (msg.find('\n') != std::string_view::npos) finding("UsageError of more than one line", msg);
}

}  // namespace ptdp::fuzz
