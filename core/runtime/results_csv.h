// The result CSV of the project's contract (docs/RESULTS.md): one long-form row per measured or
// simulated configuration, appended atomically (a new file gets the header first).
#pragma once
#include <string>
#include <vector>

namespace ptdp {

// The contract's columns, in order.
const std::vector<std::string>& result_columns();

// A row: one value per column, by name; unset columns are written empty.
class ResultRow {
 public:
  void set(const std::string& column, const std::string& value);
  void set(const std::string& column, double value);
  void set(const std::string& column, long long value);
  void set(const std::string& column, int value) { set(column, static_cast<long long>(value)); }
  const std::string& get(const std::string& column) const;
  std::string to_csv_line() const;

 private:
  std::vector<std::string> values_ = std::vector<std::string>(result_columns().size());
};

// Appends rows to `path` atomically: the old content and the new rows are written to a
// temporary file in the same directory, flushed to disk and renamed over `path`. If the file
// exists its header must equal the contract's, else RuntimeError and nothing is written.
void append_result_rows(const std::string& path, const std::vector<ResultRow>& rows);

// Checks, before any work is done, that rows can later be appended to `path`: its directory
// exists and is writable, it is not a directory, and an existing file has the contract's
// header. UsageError naming `flag` otherwise.
void check_result_csv(const std::string& path, const std::string& flag = "--csv");

// Writes `content` to `path` atomically (temporary file, fsync, rename).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace ptdp
