// Files the CLI writes: CSV files with a header, appended and rewritten under a lock so that no
// row is ever lost (also with several writers), a user's file written through (symlinks, hard
// links and its mode kept), ptdp's own files written atomically, one writer per output directory.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ptdp {

// Why a file whose first line is `first_line` takes no rows under `header`: written by an older
// version (its header a prefix of today's: the missing columns are named) or a foreign header.
std::string foreign_header_reason(const std::string& header, const std::string& first_line);

// What an older file's rows hold in a column they lack (the column's name in, the cell out):
// CSV files written by an older ptdp are brought to today's header in place, each row given these
// cells, instead of being refused. Null: such files are refused like any other header.
using ColumnFill = std::function<std::string(const std::string& column)>;

// Appends `lines` to the CSV file `path` under an exclusive lock on the file (flock), so that
// concurrent writers never lose a line; an empty or new file gets `header` first. Writes through
// symlinks and keeps hard links and the file's mode. If the file has content its header must
// equal `header` (or, with `fill`, be an older ptdp's: a prefix of it at a comma, then the file
// is first rewritten in place under today's header, its rows extended by `fill`), else
// UsageError and nothing is written; a target that is not a regular file is a RuntimeError.
void append_csv_lines(const std::string& path, const std::string& header, const std::vector<std::string>& lines,
                      const ColumnFill& fill = nullptr);

// Rewrites a CSV file in place under the same lock: `update` gets the current content (empty
// for a new file; else its header is checked first, and an older one brought up to date as
// append_csv_lines does) and returns the new one.
void update_csv_file(const std::string& path, const std::string& header,
                     const std::function<std::string(const std::string&)>& update, const ColumnFill& fill = nullptr);

// Checks, before any work is done, that lines can later be appended to `path` under `header`:
// its directory exists and is writable, it is not a directory, and an existing file has that
// header (or an older ptdp's, when `upgradable`). UsageError naming `flag` otherwise.
void check_csv_output(const std::string& path, const std::string& header, const std::string& flag,
                      bool upgradable = false);

// `content` (a CSV file whose first line is an older ptdp's header: a prefix of `header` at a
// comma) under `header`, each row given fill(column) for every column it lacks (quoted as CSV
// when needed); nullopt when the first line is not such a prefix.
std::optional<std::string> upgraded_csv(const std::string& header, const std::string& content,
                                        const ColumnFill& fill);

// Writes `content` to `path` atomically (temporary file, fsync, rename): for files ptdp owns
// (checkpoint shards, its own generated outputs). A user-named file goes through write_user_file.
// The temporary, DIR/.NAME.ptdp-tmp-XXXXXX, is locked (flock) by its writer until renamed;
// temporaries of `path` left by writers that died (their lock is free) are removed, never one
// still being written, nor a file of another name.
void write_file_atomic(const std::string& path, const std::string& content);

// One writer per output directory (--save): an exclusive lock (flock) on DIR/.ptdp.lock, held
// while the object lives (closing releases it, also when the process dies). UsageError naming
// `flag`, the directory and the holder's pid when another run holds it. flock locks belong to
// an open file: take one per directory per process (one rank), not one per thread. Once held,
// the temporaries (.NAME.ptdp-tmp-XXXXXX) that writes killed before their rename left in the
// folders a checkpoint has (DIR, DIR/iter_N, DIR/iter_N/mp_rank_*) are removed; nothing else.
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
