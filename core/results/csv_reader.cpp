#include "core/results/csv_reader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

// The library's fixed-size error buffers trip GCC's string warnings; they are its own, not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#pragma GCC diagnostic ignored "-Wrestrict"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include "core/common/error.h"
#include "core/common/one_line.h"

namespace ptdp {

namespace {

// Fields of one CSV line (quotes respected), for error messages.
size_t count_fields(const std::string& line) {
  size_t n = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) ++n;
  }
  return n;
}

// Line `number` (1-based) of a file, without its end of line; empty if there is none.
std::string line_of(const std::string& path, int number) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  for (int i = 1; i <= number; ++i)
    if (!std::getline(f, line)) return "";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// The first non-blank line: the header.
int header_line_number(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  for (int i = 1; std::getline(f, line); ++i)
    if (line.find_first_not_of(" \t\r") != std::string::npos) return i;
  return 1;
}

[[noreturn]] void rethrow_as_usage_error(const io::error::base& e, const std::string& path) {
  const auto* with_line = dynamic_cast<const io::error::with_file_line*>(&e);
  const int line = with_line && with_line->file_line > 0 ? with_line->file_line : header_line_number(path);
  if (dynamic_cast<const io::error::can_not_open_file*>(&e)) {
    const auto& c = dynamic_cast<const io::error::can_not_open_file&>(e);
    usage_error("{}: cannot be opened: {}", path, c.errno_value ? std::strerror(c.errno_value) : "unknown error");
  }
  if (dynamic_cast<const io::error::header_missing*>(&e)) usage_error("{}:1: the file is empty (no header line)", path);
  if (const auto* m = dynamic_cast<const io::error::missing_column_in_header*>(&e))
    usage_error("{}:{}: no column '{}' in the header", path, line, m->column_name);
  if (const auto* d = dynamic_cast<const io::error::duplicated_column_in_header*>(&e))
    usage_error("{}:{}: column '{}' appears twice in the header", path, line, one_line(d->column_name));
  if (dynamic_cast<const io::error::too_few_columns*>(&e) || dynamic_cast<const io::error::too_many_columns*>(&e)) {
    const size_t got = count_fields(line_of(path, line));
    const size_t want = count_fields(line_of(path, header_line_number(path)));
    usage_error("{}:{}: {} field{}, the header has {}", path, line, got, got == 1 ? "" : "s", want);
  }
  if (dynamic_cast<const io::error::escaped_string_not_closed*>(&e))
    usage_error("{}:{}: a quoted field is not closed", path, line);
  if (dynamic_cast<const io::error::line_length_limit_exceeded*>(&e))
    usage_error("{}:{}: the line is too long", path, line);
  usage_error("{}:{}: {}", path, line, one_line(e.what()));
}

}  // namespace

// Reads the asked columns with one CSVReader<kMaxColumns> (the column count is a template argument
// of the library, and each instantiation costs seconds of compile time): the names are padded with
// ones no header can hold, missing columns are tolerated by the library and checked here.
struct CsvReadImpl {
  static constexpr size_t N = CsvTable::kMaxColumns;
  template <size_t... I>
  static void run(CsvTable& t, const std::map<std::string, std::string>& absent, std::index_sequence<I...>) {
    io::CSVReader<N, io::trim_chars<' ', '\t'>, io::double_quote_escape<',', '"'>, io::throw_on_overflow,
                  io::empty_line_comment>
        in(t.path_);
    std::array<std::string, N> names;
    for (size_t i = 0; i < N; ++i)
      names[i] = i < t.columns_.size() ? t.columns_[i] : std::string("\n") + std::to_string(i);  // a header line has no '\n'
    in.read_header(io::ignore_extra_column | io::ignore_missing_column, names[I]...);
    std::vector<std::pair<size_t, std::string>> fill;  // (column, value) of the absent ones allowed
    for (size_t i = 0; i < t.columns_.size(); ++i) {
      const std::string& c = t.columns_[i];
      if (in.has_column(c)) continue;
      if (const auto it = absent.find(c); it != absent.end()) {
        fill.emplace_back(i, it->second);
        continue;
      }
      usage_error("{}:{}: no column '{}' in the header", t.path_, header_line_number(t.path_), one_line(c));
    }
    std::array<std::string, N> v;
    while (in.read_row(v[I]...)) {
      CsvTable::Row r;
      r.line = static_cast<int>(in.get_file_line());
      r.values.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(t.columns_.size()));
      for (const auto& [i, value] : fill) r.values[i] = value;
      t.rows_.push_back(std::move(r));
    }
  }
  static void read(CsvTable& t, const std::map<std::string, std::string>& absent) {
    run(t, absent, std::make_index_sequence<N>{});
  }
};

namespace {
// A shared flock held for the lifetime of the object (none when the file cannot be opened: the
// reader then reports the error itself).
class SharedLock {
 public:
  explicit SharedLock(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
      }
  }
  ~SharedLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  SharedLock(const SharedLock&) = delete;
  SharedLock& operator=(const SharedLock&) = delete;

 private:
  int fd_;
};
}  // namespace

CsvTable CsvTable::read(const std::string& path, const std::vector<std::string>& columns, bool lock,
                        const std::map<std::string, std::string>& absent) {
  PTDP_CHECK(!columns.empty() && columns.size() <= kMaxColumns, "CsvTable::read: {} columns asked (1..{})",
             columns.size(), kMaxColumns);
  for (size_t i = 0; i < columns.size(); ++i)
    for (size_t j = i + 1; j < columns.size(); ++j)
      PTDP_CHECK(columns[i] != columns[j], "CsvTable::read: column '{}' asked twice", columns[i]);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) usage_error("{}: cannot be opened: no such file", path);
  if (fs::is_directory(path, ec)) usage_error("{}: cannot be opened: it is a directory", path);
  if (!fs::is_regular_file(path, ec))  // a FIFO would block the read, a device might never end
    usage_error("{}: cannot be read: not a regular file (a FIFO, device or socket)", path);

  std::optional<SharedLock> shared;
  if (lock) shared.emplace(path);
  CsvTable t;
  t.path_ = path;
  t.columns_ = columns;
  try {
    CsvReadImpl::read(t, absent);
  } catch (const io::error::base& e) {
    rethrow_as_usage_error(e, path);
  }
  return t;
}

size_t CsvTable::index_of(const std::string& column) const {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == column) return i;
  PTDP_CHECK(false, "{}: column '{}' was not read", path_, column);
  return 0;
}

const std::string& CsvTable::text(size_t row, const std::string& column) const {
  return rows_.at(row).values[index_of(column)];
}

std::optional<double> parse_number(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t");
  if (b == std::string::npos) return std::nullopt;
  const size_t e = text.find_last_not_of(" \t") + 1;
  const char* first = text.data() + b;
  const char* last = text.data() + e;
  if (*first == '+') {  // from_chars takes no leading '+'; nor may another sign follow it ("+-1")
    ++first;
    if (first == last || *first == '-' || *first == '+') return std::nullopt;
  }
  double v = 0;
  const auto r = std::from_chars(first, last, v);
  if (r.ec != std::errc() || r.ptr != last || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

// Whether `text` spells infinity or NaN ("inf", "-nan", "+Infinity"): a number, but not a finite one.
bool spells_non_finite(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t");
  if (b == std::string::npos) return false;
  const char* first = text.data() + b;
  const char* last = text.data() + text.find_last_not_of(" \t") + 1;
  if (*first == '+') ++first;
  double v = 0;
  const auto r = std::from_chars(first, last, v);
  return r.ec == std::errc() && r.ptr == last && !std::isfinite(v);
}

}  // namespace

std::optional<double> CsvTable::number_or_empty(size_t row, const std::string& column) const {
  const std::string& s = text(row, column);
  if (s.empty()) return std::nullopt;
  const std::optional<double> v = parse_number(s);
  if (!v && spells_non_finite(s))
    usage_error("{}:{}: column '{}': '{}' is not a finite number", path_, line(row), column, one_line(s));
  if (!v) usage_error("{}:{}: column '{}': '{}' is not a number", path_, line(row), column, one_line(s));
  return v;
}

double CsvTable::number(size_t row, const std::string& column) const {
  const std::optional<double> v = number_or_empty(row, column);
  if (!v) usage_error("{}:{}: column '{}' is empty, expected a number", path_, line(row), column);
  return *v;
}

long long CsvTable::integer(size_t row, const std::string& column) const {
  const std::string& s = text(row, column);
  long long v = 0;
  // A leading '+' is taken, as number() takes it (from_chars does not); no second sign.
  const char* first = s.data() + (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+' ? 1 : 0);
  const auto r = std::from_chars(first, s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    usage_error("{}:{}: column '{}': '{}' is not an integer", path_, line(row), column, one_line(s));
  return v;
}

}  // namespace ptdp
