// libFuzzer target: CsvTable::read (core/runtime/csv_reader.h) on a file written from the
// input, then every accessor on every row. Input layout:
//   first line: the column names to ask for, separated by '|' (duplicates dropped, at most
//   CsvTable::kMaxColumns; none: "a") | the rest: the CSV file.
// Expected: ptdp::UsageError, one line "FILE:LINE: rule"; anything else (a crash, a sanitizer report,
// another exception, a message without the file name) is a finding.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/csv_reader_fuzz/.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/error.h"
#include "core/runtime/csv_reader.h"

namespace {

// One file in a private folder per process, removed at exit. Kept in static buffers: an atexit
// handler runs after the destructors of later function statics.
char g_dir[64], g_path[96];

std::string csv_path() {
  if (g_dir[0] == '\0') {
    std::strcpy(g_dir, "/tmp/ptdp_csv_fuzz.XXXXXX");
    if (!::mkdtemp(g_dir)) std::abort();
    std::snprintf(g_path, sizeof g_path, "%s/results.csv", g_dir);
    std::atexit([] {
      ::unlink(g_path);
      ::rmdir(g_dir);
    });
  }
  return g_path;
}

[[noreturn]] void finding(const char* what, const std::string& msg) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what, msg.c_str());
  std::abort();
}

// Every UsageError is one line naming the file.
void check_message(const ptdp::UsageError& e) {
  const std::string_view msg(e.what());
  if (msg.find(csv_path()) == std::string_view::npos) finding("UsageError without the file name", e.what());
  if (msg.find('\n') != std::string_view::npos) finding("UsageError of more than one line", e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view spec = nl == std::string_view::npos ? in : in.substr(0, nl);
  const std::string_view body = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);

  std::vector<std::string> columns;
  for (size_t at = 0; at <= spec.size() && columns.size() < ptdp::CsvTable::kMaxColumns;) {
    size_t bar = spec.find('|', at);
    if (bar == std::string_view::npos) bar = spec.size();
    std::string name(spec.substr(at, bar - at));
    if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(std::move(name));
    at = bar + 1;
  }
  if (columns.empty()) columns.push_back("a");

  FILE* f = std::fopen(csv_path().c_str(), "wb");
  if (!f) std::abort();
  if (!body.empty() && std::fwrite(body.data(), 1, body.size(), f) != body.size()) std::abort();
  std::fclose(f);

  try {
    const ptdp::CsvTable t = ptdp::CsvTable::read(csv_path(), columns);
    if (t.columns() != columns) finding("columns", "not the ones asked for");
    int last_line = 1;
    for (size_t r = 0; r < t.size(); ++r) {
      if (t.line(r) <= last_line) finding("line numbers", "not increasing after the header");
      last_line = t.line(r);
      for (const std::string& c : columns) {
        (void)t.text(r, c);
        (void)ptdp::parse_number(t.text(r, c));
        try {
          (void)t.number_or_empty(r, c);
        } catch (const ptdp::UsageError& e) {
          check_message(e);
        }
        try {
          (void)t.number(r, c);
        } catch (const ptdp::UsageError& e) {
          check_message(e);
        }
        try {
          (void)t.integer(r, c);
        } catch (const ptdp::UsageError& e) {
          check_message(e);
        }
      }
    }
  } catch (const ptdp::UsageError& e) {
    check_message(e);
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
