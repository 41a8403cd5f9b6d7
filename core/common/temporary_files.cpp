#include "core/common/temporary_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace ptdp {
namespace {

constexpr std::string_view kMark = ".ptdp-tmp.";

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

struct Temporary {
  std::string target, host;
  long pid = 0;
};

// NAME.ptdp-tmp.HOST.PID.N, or the older NAME.tmp-PID-N / NAME.tmp.PID.N (of this host).
std::optional<Temporary> parse(const std::string& name) {
  const size_t n_dot = name.find_last_of(".-");
  if (n_dot == std::string::npos || !all_digits(std::string_view(name).substr(n_dot + 1))) return std::nullopt;
  const size_t pid_dot = name.find_last_of(name[n_dot], n_dot - 1);
  if (pid_dot == std::string::npos || pid_dot == 0) return std::nullopt;
  const std::string_view pid = std::string_view(name).substr(pid_dot + 1, n_dot - pid_dot - 1);
  if (!all_digits(pid)) return std::nullopt;
  Temporary t;
  t.pid = std::stol(std::string(pid));
  const std::string head = name.substr(0, pid_dot);  // NAME.ptdp-tmp.HOST, NAME.tmp
  const size_t mark = head.rfind(kMark);
  if (name[n_dot] == '.' && mark != std::string::npos) {
    t.target = head.substr(0, mark);
    t.host = head.substr(mark + kMark.size());
  } else if (head.size() > 4 && head.compare(head.size() - 4, 4, ".tmp") == 0) {
    t.target = head.substr(0, head.size() - 4);
    t.host = host_name();
  } else {
    return std::nullopt;
  }
  if (t.target.empty() || t.host.empty()) return std::nullopt;
  return t;
}

bool alive(long pid) {
  if (pid <= 0) return true;  // not a process id: never removed
  if (pid == ::getpid()) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string temporary_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  static const std::string host = host_name();
  return fmt::format("{}{}{}.{}.{}", path, kMark, host, ::getpid(), counter.fetch_add(1));
}

int remove_dead_temporaries(const std::string& dir, const std::function<bool(const std::string&)>& ours) {
  namespace fs = std::filesystem;
  const std::string here = host_name();
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto t = parse(name);
    if (!t || t->host != here || !ours(t->target) || alive(t->pid)) continue;
    std::error_code rm;
    if (it->is_regular_file(rm) && fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace ptdp
