// The result CSV of the project's contract (docs/RESULTS.md): one long-form row per measured or
// simulated configuration. Its columns are the contract's, then every field column of the tables
// (config_fields.h) not among them; the configuration key is every column of a field in the key.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/common/enum_names.h"
#include "core/config/run_config.h"

namespace ptdp {

// The columns, in order, and the header line they make (no newline).
const std::vector<std::string>& result_columns();
std::string result_header_line();
// Why a file whose first line is `first_line` takes no rows: written by an older ptdp (its header
// a prefix of today's: the missing columns are named) or a foreign header.
std::string foreign_header_reason(const std::string& first_line);

// The columns that identify a configuration, in header order: every field in the key (the model's
// shape and architecture, the layout, precision, ZeRO, sequence parallelism, the simulated
// software stack, ...) and mode, gpus and stage_layers. `ptdp reproduce` keeps one row per key,
// `ptdp compare` pairs rows by it.
const std::vector<std::string>& config_key_columns();
// The key columns a file may lack (written before they existed), with the value such a row had
// (the fields' key defaults). An empty field reads as the same default.
const std::map<std::string, std::string>& config_key_defaults();
std::string config_key_value(const std::string& column, const std::string& text);
// The key of a row whose fields `field(column)` gives (values through config_key_value).
std::string config_key(const std::function<std::string(const std::string&)>& field);
// Why a result column is not in the key: a field's reason from its table, or for a column that is
// no field, what it holds (a measurement, provenance, or a value the key's columns determine).
// Empty for a key column, and for a column nobody has given a reason (ConfigFields test).
std::string not_key_reason(const std::string& column);

// A row: one value per column, by name; unset columns are written empty.
class ResultRow {
 public:
  void set(const std::string& column, const std::string& value);
  void set(const std::string& column, double value);
  void set(const std::string& column, long long value);
  void set(const std::string& column, int value) { set(column, static_cast<long long>(value)); }
  template <NamedEnum E>
  void set(const std::string& column, E value) {
    set(column, std::string(enum_name(value)));
  }
  const std::string& get(const std::string& column) const;
  std::string to_csv_line() const;

 private:
  std::vector<std::string> values_ = std::vector<std::string>(result_columns().size());
};

// The configuration's columns (every field's, then mode, params, gpus, num_microbatches and
// stage_layers) of a row of `mode` (run | simulate).
ResultRow config_row(const RunConfig& c, const std::string& mode);

// Appends rows under the file's lock (output_files.h: append_csv_lines), after the header when
// the file is new. A file of an older ptdp (its header a prefix of today's) is first brought to
// today's header in place, its rows given each new key column's old default (else empty); a file
// with another header is refused (UsageError) and left alone.
void append_result_rows(const std::string& path, const std::vector<ResultRow>& rows);
// Rewrites a result file in place under the same lock (output_files.h: update_csv_file), an older
// ptdp's file brought up to date first as above.
void update_result_file(const std::string& path, const std::function<std::string(const std::string&)>& update);
// Checks, before any work is done, that rows can later be appended to `path` (output_files.h:
// check_csv_output). UsageError naming `flag` otherwise.
void check_result_csv(const std::string& path, const std::string& flag = "--csv");

}  // namespace ptdp
