// The result CSV of the project's contract (docs/RESULTS.md): one long-form row per measured or
// simulated configuration, appended atomically (a new file gets the header first).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ptdp {

// The contract's columns, in order, and the header line they make (no newline).
const std::vector<std::string>& result_columns();
std::string result_header_line();
// Why a file whose first line is `first_line` takes no rows: written by an older ptdp (its header
// a prefix of today's: the missing columns are named) or a foreign header.
std::string foreign_header_reason(const std::string& first_line);

// The columns that identify a configuration: every setting that changes what a run measures (the
// model's shape and architecture, query groups, MLP width and norm eps included; the layout,
// uneven stages included; precision, ZeRO, sequence parallelism, the simulated software stack).
// `ptdp reproduce` keeps one row per key, `ptdp compare` pairs rows by it.
const std::vector<std::string>& config_key_columns();
// The key columns a file may lack (written before they existed), with the value such a row had:
// arch gpt, sequence_parallel 0, zero 0; stack, query_groups, ffn_hidden_size, norm_eps and
// stage_layers empty (none, or the default). An empty field reads as the same default.
const std::map<std::string, std::string>& config_key_defaults();
std::string config_key_value(const std::string& column, const std::string& text);
// The key of a row whose fields `field(column)` gives (values through config_key_value).
std::string config_key(const std::function<std::string(const std::string&)>& field);

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

// Appends rows to `path` under an exclusive lock on the file (flock), so that concurrent writers
// never lose a row; an empty or new file gets the header first. Writes through symlinks and keeps
// hard links and the file's mode. If the file has content its header must equal the contract's,
// else UsageError and nothing is written; a target that is not a regular file is a RuntimeError.
void append_result_rows(const std::string& path, const std::vector<ResultRow>& rows);

// Rewrites a result file in place under the same lock: `update` gets the current content (empty
// for a new file; else its header is checked first) and returns the new one.
void update_result_file(const std::string& path, const std::function<std::string(const std::string&)>& update);

// Checks, before any work is done, that rows can later be appended to `path`: its directory
// exists and is writable, it is not a directory, and an existing file has the contract's
// header. UsageError naming `flag` otherwise.
void check_result_csv(const std::string& path, const std::string& flag = "--csv");

// Writes `content` to `path` atomically (temporary file, fsync, rename): for files ptdp owns
// (checkpoint shards, its own generated outputs). A user-named file goes through write_user_file.
// The temporary is locked (flock) by its writer until renamed; temporaries of `path` left by
// writers that died (their lock is free) are removed, never one still being written.
void write_file_atomic(const std::string& path, const std::string& content);

// One writer per output directory (--save): an exclusive lock (flock) on DIR/.ptdp.lock, held
// while the object lives (closing releases it, also when the process dies). UsageError naming
// `flag`, the directory and the holder's pid when another run holds it. flock locks belong to
// an open file: take one per directory per process (one rank), not one per thread. Once held,
// the temporaries that writes killed before their rename left anywhere under DIR are removed.
class DirLock {
 public:
  DirLock(const std::string& dir, const std::string& flag);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// Replaces the content of a user-named file in place under its lock: through symlinks, keeping
// hard links and the mode; RuntimeError for a target that is not a regular file.
void write_user_file(const std::string& path, const std::string& content);

// Checks, before any work is done, that `path` (a user-named output file) can be written: a
// name, an existing writable directory, and a writable regular file if it exists. UsageError
// naming `flag` otherwise.
void check_output_file(const std::string& path, const std::string& flag);

// The same for an output directory (--save): makes it (as the first save would) and writes and
// removes a probe file in it (permissions alone say nothing for root or on special file systems).
void check_output_dir(const std::string& path, const std::string& flag);

}  // namespace ptdp
