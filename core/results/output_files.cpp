#include "core/results/output_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/common/error.h"

namespace ptdp {

namespace {
// An older ptdp wrote the same columns up to one it did not have yet.
bool older_header(const std::string& h, const std::string& first_line) {
  return !first_line.empty() && first_line.size() < h.size() && h.compare(0, first_line.size(), first_line) == 0 &&
         h[first_line.size()] == ',';
}

// A cell as CSV writes it: quoted when it holds a comma, a quote or a line break.
std::string csv_cell(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q.append(c == '"' ? "\"\"" : std::string(1, c));
  return q + "\"";
}

// The content's first line without its line end.
std::string first_line_in(const std::string& content) {
  const std::string first = content.substr(0, content.find('\n'));
  return !first.empty() && first.back() == '\r' ? first.substr(0, first.size() - 1) : first;
}
}  // namespace

std::optional<std::string> upgraded_csv(const std::string& header, const std::string& content,
                                        const ColumnFill& fill) {
  const std::string old = first_line_in(content);
  if (!fill || !older_header(header, old)) return std::nullopt;
  std::string extra;  // the cells of the columns after the old header's last
  for (size_t at = old.size() + 1; at <= header.size();) {
    const size_t end = std::min(header.find(',', at), header.size());
    extra.append(",").append(csv_cell(fill(header.substr(at, end - at))));
    at = end + 1;
  }
  std::string out = header + "\n";
  size_t at = content.find('\n');
  while (at != std::string::npos && at + 1 < content.size()) {
    const size_t end = content.find('\n', at + 1);
    std::string line = content.substr(at + 1, (end == std::string::npos ? content.size() : end) - at - 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.append(line).append(extra).push_back('\n');
    at = end;
  }
  return out;
}

std::string foreign_header_reason(const std::string& h, const std::string& first_line) {
  if (older_header(h, first_line))
    return fmt::format("was written by an older ptdp: its header lacks the columns {} (rows are never appended "
                       "under another header)",
                       h.substr(first_line.size() + 1));
  return "exists but its header is not the result CSV header";
}

namespace {
// Takes the lock of a temporary without waiting: false while its writer holds it.
bool try_lock(int fd) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0)
    if (errno != EINTR) return false;
  return true;
}

// Removes the temporary at `path` if its writer is dead (its lock can be taken).
void remove_if_dead(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  if (try_lock(fd)) ::unlink(path.c_str());  // still ours: the writer checks its name after locking
  ::close(fd);
}

// ".NAME.ptdp-tmp-XXXXXX" (mkstemp's six characters): a temporary of write_file_atomic, a name
// no user file is given by chance.
constexpr std::string_view kTmpMark = ".ptdp-tmp-";
bool is_temporary_name(const std::string& n) {
  const size_t tail = kTmpMark.size() + 6;
  return n.size() > tail + 1 && n[0] == '.' && n.compare(n.size() - tail, kTmpMark.size(), kTmpMark) == 0;
}

// The folders of a checkpoint directory that ptdp writes (core/train/checkpoint.cpp): the
// directory itself, iter_NNNNNNN and iter_NNNNNNN/mp_rank_* in it; `rel` relative to it.
bool is_checkpoint_folder(const std::filesystem::path& rel) {
  const auto digits = [](const std::string& s, size_t from) {
    return s.size() > from && s.find_first_not_of("0123456789_", from) == std::string::npos;
  };
  std::vector<std::string> parts;
  for (const auto& p : rel)
    if (!p.empty() && p != ".") parts.push_back(p.string());
  if (parts.empty()) return true;
  if (parts.size() > 2 || !parts[0].starts_with("iter_") || !digits(parts[0], 5)) return false;
  return parts.size() == 1 || (parts[1].starts_with("mp_rank_") && digits(parts[1], 8));
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::string name = ".";
  name.append(p.filename().string()).append(kTmpMark);
  // A write killed before its rename (SIGKILL, power loss) leaves its temporary behind. Each
  // writer holds a lock on its temporary until the rename: one whose lock can be taken is dead
  // and is removed; one still locked is another writer's, left alone.
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.size() == name.size() + 6 && n.compare(0, name.size(), name) == 0) remove_if_dead(it->path());
  }
  name.append("XXXXXX");
  std::string tmpl;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmpl = (dir / name).string();
    fd = mkstemp(tmpl.data());
    if (fd < 0) throw RuntimeError(fmt::format("{}: cannot create a temporary file: {}", path, std::strerror(errno)));
    // Locked, then checked to be still linked under its name: another writer's clean-up may have
    // taken its lock between mkstemp and flock, and removed it.
    struct stat mine {}, named {};
    if (try_lock(fd) && ::fstat(fd, &mine) == 0 && ::stat(tmpl.c_str(), &named) == 0 && mine.st_ino == named.st_ino &&
        mine.st_dev == named.st_dev)
      break;
    ::close(fd);
    fd = -1;
    if (attempt == 100) throw RuntimeError(fmt::format("{}: cannot keep a temporary file", path));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      int e = errno;
      ::unlink(tmpl.c_str());
      ::close(fd);
      throw RuntimeError(fmt::format("{}: write failed: {}", path, std::strerror(e)));
    }
    done += static_cast<size_t>(w);
  }
  fchmod(fd, 0644);
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    ::close(fd);
    throw RuntimeError(fmt::format("{}: flush failed: {}", path, std::strerror(e)));
  }
  // Renamed while still locked; the lock goes with the close.
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmpl.c_str());
    ::close(fd);
    throw RuntimeError(fmt::format("{}: rename failed: {}", path, std::strerror(e)));
  }
  ::close(fd);
}

DirLock::DirLock(const std::string& dir, const std::string& flag) {
  const std::string path = (std::filesystem::path(dir) / ".ptdp.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) usage_error("{} {}: cannot open its lock file {}: {}", flag, dir, path, std::strerror(errno));
  if (!try_lock(fd_)) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder(buf, n > 0 ? size_t(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    usage_error("{} {}: another ptdp run writes there ({} is locked{}); give each run its own {} directory", flag, dir,
                path, holder.empty() ? std::string() : " by pid " + holder, flag);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // the pid is informative only
  }
  // The directory is this run's now: the temporaries of writes killed before their rename, in the
  // folders ptdp writes (a shard of an iteration that is never saved again), are removed; a
  // temporary still locked by a writer is left alone, and so is every file of another name or in
  // another folder (the user's).
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::path rel = fs::relative(it->path().parent_path(), dir, ec);
    if (ec) break;
    if (it->is_directory(ec) && !is_checkpoint_folder(fs::relative(it->path(), dir, ec))) {
      it.disable_recursion_pending();
      continue;
    }
    if (is_checkpoint_folder(rel) && it->is_regular_file(ec) && is_temporary_name(it->path().filename().string()))
      remove_if_dead(it->path());
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
std::string first_line_of(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a shared lock while reading
  if (fd >= 0)
    while (::flock(fd, LOCK_SH) != 0 && errno == EINTR) {
    }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  std::ifstream in(path, std::ios::binary);
  std::string first;
  std::getline(in, first);
  if (!first.empty() && first.back() == '\r') first.pop_back();
  return first;
}
}  // namespace

namespace {
// Paths the kernel refuses (ENAMETOOLONG) are refused before any work, named by their start.
void check_path_length(const std::string& path, const std::string& flag) {
  size_t longest = 0;
  for (size_t at = 0; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    longest = std::max(longest, slash - at);
    at = slash + 1;
  }
  if (path.size() >= PATH_MAX || longest > NAME_MAX)
    usage_error("{} {}...: the path is {} characters long, its longest part {} (at most {} and {})", flag,
                path.substr(0, 40), path.size(), longest, PATH_MAX - 1, NAME_MAX);
}

// The directory a new file of `path` would go to exists and is writable.
void check_parent_directory(const std::filesystem::path& p, const std::string& flag) {
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    usage_error("{} {}: directory {} does not exist", flag, p.string(), dir.string());
  if (::access(dir.c_str(), W_OK) != 0)
    usage_error("{} {}: directory {} is not writable", flag, p.string(), dir.string());
}
}  // namespace

void check_csv_output(const std::string& path, const std::string& header, const std::string& flag,
                      bool upgradable) {
  check_path_length(path, flag);
  namespace fs = std::filesystem;
  const fs::path p(path);
  check_parent_directory(p, flag);
  std::error_code ec;
  if (fs::is_directory(p, ec)) usage_error("{} {}: is a directory, not a CSV file", flag, path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))  // follows symlinks; reading a FIFO would block
    usage_error("{} {}: is not a regular file (a FIFO, device or socket); rows go to a regular file", flag, path);
  if (fs::exists(p, ec) && ::access(path.c_str(), W_OK) != 0) usage_error("{} {}: is not writable", flag, path);
  if (fs::exists(p, ec) && st.st_size > 0 && first_line_of(path) != header &&
      !(upgradable && older_header(header, first_line_of(path))))
    usage_error("{} {}: {}; choose another file", flag, path, foreign_header_reason(header, first_line_of(path)));
}

namespace {

// A user's result file opened for update under an exclusive advisory lock (flock), through
// symlinks; hard links and the file's mode stay as they are. Refuses what is not a regular file
// (a FIFO or device would block or swallow the rows) without blocking on it.
class LockedFile {
 public:
  explicit LockedFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd_ < 0) throw RuntimeError(fmt::format("{}: cannot open for appending: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw RuntimeError(fmt::format("{}: is not a regular file; rows go to a regular file", path));
    }
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        const int e = errno;
        ::close(fd_);
        throw RuntimeError(fmt::format("{}: cannot lock: {}", path, std::strerror(e)));
      }
  }
  ~LockedFile() { ::close(fd_); }  // closing releases the lock
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  std::string read_all() const {
    std::string out;
    char buf[65536];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw RuntimeError(fmt::format("{}: read failed: {}", path_, std::strerror(errno)));
      }
      if (n == 0) return out;
      out.append(buf, size_t(n));
      at += n;
    }
  }

  // Appends (O_APPEND: at the end, whatever the offset) and flushes to disk. A write that fails
  // part way (a full disk) is cut off again, so the file never ends in half a row.
  void append(const std::string& text) const {
    struct stat st {};
    const bool sized = ::fstat(fd_, &st) == 0;
    for (size_t done = 0; done < text.size();) {
      const ssize_t w = ::write(fd_, text.data() + done, text.size() - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        if (sized && ::ftruncate(fd_, st.st_size) != 0) {
          // the message below still names the failed write
        }
        throw RuntimeError(fmt::format("{}: write failed: {}", path_, std::strerror(e)));
      }
      done += size_t(w);
    }
    if (::fsync(fd_) != 0) throw RuntimeError(fmt::format("{}: flush failed: {}", path_, std::strerror(errno)));
  }

  // Replaces the file's content `old` (what read_all gave) with `next`, in place (the inode, its
  // links and mode stay), never losing `old` on a failed write: the blocks `next` needs beyond the
  // old size are reserved first (fallocate without changing the size); a write that still fails
  // (a filesystem without fallocate, a file size limit) puts `old` back over the blocks it already
  // had, so a full disk leaves the previous content as it was.
  void replace(const std::string& old, const std::string& next) const {
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_APPEND);  // Linux's pwrite ignores the offset under O_APPEND
    if (next.size() > old.size()) {
      if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, off_t(next.size())) != 0 && errno != EOPNOTSUPP &&
          errno != ENOSYS)
        throw RuntimeError(fmt::format("{}: cannot write {} bytes: {}; its previous content is kept", path_,
                                       next.size(), std::strerror(errno)));
    }
    const int e = write_at(next);
    if (e != 0) {
      write_at(old);
      const bool restored = ::ftruncate(fd_, off_t(old.size())) == 0;
      throw RuntimeError(fmt::format("{}: write failed: {}; {}", path_, std::strerror(e),
                                     restored ? "its previous content is kept" : "its previous content is damaged"));
    }
    if (::ftruncate(fd_, off_t(next.size())) != 0)
      throw RuntimeError(fmt::format("{}: cannot truncate: {}", path_, std::strerror(errno)));
    if (::fsync(fd_) != 0) throw RuntimeError(fmt::format("{}: flush failed: {}", path_, std::strerror(errno)));
  }

 private:
  // pwrite of `text` from offset 0; the errno of a failure, 0 on success.
  int write_at(const std::string& text) const {
    for (size_t done = 0; done < text.size();) {
      const ssize_t w = ::pwrite(fd_, text.data() + done, text.size() - done, off_t(done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      done += size_t(w);
    }
    return 0;
  }

  std::string path_;
  int fd_ = -1;
};

std::string header_checked(const std::string& path, const std::string& header, const std::string& content) {
  const std::string h = first_line_in(content);
  if (h != header)
    throw UsageError(fmt::format("{}: {}; choose another --csv file", path, foreign_header_reason(header, h)));
  return content;
}

}  // namespace

// Under the file's lock, so that concurrent writers (threads, processes, MPI jobs) never lose a
// row; each call's rows land together, after a header when the file was empty.
void append_csv_lines(const std::string& path, const std::string& header, const std::vector<std::string>& lines,
                      const ColumnFill& fill) {
  LockedFile f(path);
  const std::string content = f.read_all();
  if (std::optional<std::string> up = upgraded_csv(header, content, fill)) {  // an older ptdp's file
    for (const auto& l : lines) up->append(l).push_back('\n');
    f.replace(content, *up);
    return;
  }
  std::string text;
  if (content.empty()) text.append(header).push_back('\n');
  else if (header_checked(path, header, content).back() != '\n') text.push_back('\n');
  for (const auto& l : lines) text.append(l).push_back('\n');
  f.append(text);
}

void write_user_file(const std::string& path, const std::string& content) {
  LockedFile f(path);
  f.replace(f.read_all(), content);
}

void check_output_file(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  if (path.empty()) usage_error("{} '': needs a file name", flag);
  check_path_length(path, flag);
  const fs::path p(path);
  check_parent_directory(p, flag);
  std::error_code ec;
  if (fs::is_directory(p, ec)) usage_error("{} {}: is a directory, not a file", flag, path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      usage_error("{} {}: is not a regular file (a FIFO, device or socket); choose a regular file", flag, path);
    if (::access(path.c_str(), W_OK) != 0) usage_error("{} {}: is not writable", flag, path);
  }
}

void check_output_dir(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  if (path.empty()) usage_error("{} '': needs a directory name", flag);
  check_path_length(path, flag);
  // Made now, as the first save would (several processes of one job may do this at once: making
  // an existing directory is no error). Permissions alone say nothing for root or on special file
  // systems: a probe file with a unique name is made and removed.
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path, ec))
    usage_error("{} {}: cannot create the directory: {}", flag, path, ec ? ec.message() : "not a directory");
  std::string probe = (fs::path(path) / ".ptdp-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) usage_error("{} {}: cannot write in the directory: {}", flag, path, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void update_csv_file(const std::string& path, const std::string& header,
                     const std::function<std::string(const std::string&)>& update, const ColumnFill& fill) {
  LockedFile f(path);
  const std::string content = f.read_all();
  const std::optional<std::string> up = upgraded_csv(header, content, fill);
  const std::string next = update(content.empty() ? content : up ? *up : header_checked(path, header, content));
  f.replace(content, next);
}

}  // namespace ptdp
