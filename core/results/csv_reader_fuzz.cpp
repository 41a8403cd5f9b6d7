// libFuzzer target: CsvTable::read (core/results/csv_reader.h) on a file written from the
// input, then every accessor on every row. Input layout:
//   first line: the column names to ask for, separated by '|' (duplicates dropped, at most
//   CsvTable::kMaxColumns; none: "a") | the rest: the CSV file.
// Expected: ptdp::UsageError, one line "FILE:LINE: rule"; anything else (a crash, a sanitizer report,
// another exception, a message without the file name) is a finding.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/csv_reader_fuzz/.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/error.h"
#include "core/results/csv_reader.h"
#include "fuzz/fuzz_util.h"

using ptdp::fuzz::check_usage_message;  // every UsageError is one line naming the file
using ptdp::fuzz::finding;

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

  const std::string path = ptdp::fuzz::scratch_path("results.csv");
  ptdp::fuzz::write_scratch(path, reinterpret_cast<const uint8_t*>(body.data()), body.size());

  try {
    const ptdp::CsvTable t = ptdp::CsvTable::read(path, columns);
    if (t.columns() != columns) finding("columns", "not the ones asked for");
    int last_line = 1;
    for (size_t r = 0; r < t.size(); ++r) {
      if (t.line(r) <= last_line) finding("line numbers", "not increasing after the header");
      last_line = t.line(r);
      for (const std::string& c : columns) {
        (void)t.text(r, c);
        // What parse_number accepts is a plain decimal: blanks, at most one sign, then a digit or '.'.
        if (ptdp::parse_number(t.text(r, c))) {
          std::string_view v = t.text(r, c);
          v.remove_prefix(std::min(v.size(), v.find_first_not_of(" \t")));
          if (!v.empty() && (v[0] == '+' || v[0] == '-')) v.remove_prefix(1);
          if (v.empty() || !((v[0] >= '0' && v[0] <= '9') || v[0] == '.'))
            finding("parse_number accepted", t.text(r, c));
        }
        try {
          (void)t.number_or_empty(r, c);
        } catch (const ptdp::UsageError& e) {
          check_usage_message(e.what(), path);
        }
        try {
          (void)t.number(r, c);
        } catch (const ptdp::UsageError& e) {
          check_usage_message(e.what(), path);
        }
        try {
          (void)t.integer(r, c);
        } catch (const ptdp::UsageError& e) {
          check_usage_message(e.what(), path);
        }
      }
    }
  } catch (const ptdp::UsageError& e) {
    check_usage_message(e.what(), path);
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
