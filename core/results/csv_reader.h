// Reading CSV files by column name through fast-cpp-csv-parser (libfccp): the named columns of
// every row as text, with each row's line number, and strict number parsing. Every malformed
// input is a UsageError that names the file and the line: "FILE:LINE: rule".
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptdp {

class CsvTable {
 public:
  // The most columns one read can ask for.
  static constexpr size_t kMaxColumns = 64;

  // Reads `columns` (unique names, 1..kMaxColumns) of every row of `path`. The first line is
  // the header; it may hold other columns in any order (they are ignored). Fields may be
  // quoted ("a,b", "say ""x"""); leading and trailing blanks are trimmed. UsageError:
  //   FILE: cannot be opened (missing file, a directory, no permission)
  //   FILE:1: the file is empty (no header) | no column 'NAME' in the header | column 'NAME' twice
  //   FILE:LINE: K fields, the header has N | a quoted field is not closed
  // Reads under a shared lock on the file (flock), so that a writer holding ptdp's exclusive
  // lock (results_csv.h) is never seen half-way; `lock` false for a caller that holds the
  // exclusive lock itself. A column of `columns` named in `absent` may be missing from the header
  // (a file written before it existed): each row then reads as the value given there.
  static CsvTable read(const std::string& path, const std::vector<std::string>& columns, bool lock = true,
                       const std::map<std::string, std::string>& absent = {});

  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }
  size_t size() const { return rows_.size(); }
  // The file's line number of row i (the header is line 1).
  int line(size_t row) const { return rows_.at(row).line; }
  const std::string& text(size_t row, const std::string& column) const;
  // The field as a finite number; UsageError "FILE:LINE: column 'NAME': 'TEXT' is not a number"
  // ("... is not a finite number" for inf and nan in any spelling).
  double number(size_t row, const std::string& column) const;
  // The same, or nullopt for an empty field.
  std::optional<double> number_or_empty(size_t row, const std::string& column) const;
  // The same as an integer (no fraction, no exponent).
  long long integer(size_t row, const std::string& column) const;

 private:
  struct Row {
    int line = 0;
    std::vector<std::string> values;
  };
  size_t index_of(const std::string& column) const;
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<Row> rows_;

  friend struct CsvReadImpl;
};

// A strict decimal number: the whole text (after trimming blanks) must parse, and be finite.
std::optional<double> parse_number(const std::string& text);

}  // namespace ptdp
