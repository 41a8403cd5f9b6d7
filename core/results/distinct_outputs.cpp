#include "core/results/distinct_outputs.h"

#include <sys/stat.h>

#include <filesystem>

#include "core/common/error.h"

namespace ptdp {

namespace {
struct Named {
  std::string flag, path, resolved;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

// The absolute path `path` names once links are followed, a dangling one too (its target is
// where a write through it goes; weakly_canonical leaves a dangling last part as it is).
Named resolve(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  Named n{flag, path, path};
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  for (int hops = 0; !ec && hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path target = fs::read_symlink(p, ec);
    if (!ec) p = target.is_absolute() ? target : p.parent_path() / target;
  }
  ec.clear();
  if (const auto canon = fs::weakly_canonical(p, ec); !ec) n.resolved = canon.string();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) n.exists = true, n.dev = st.st_dev, n.ino = st.st_ino;
  return n;
}
}  // namespace

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<Named> seen;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    const Named n = resolve(flag, path);
    for (const Named& o : seen) {
      const bool same = o.resolved == n.resolved || (o.exists && n.exists && o.dev == n.dev && o.ino == n.ino);
      if (!same) continue;
      const std::string how = o.path == n.path ? "" : " (through a link)";
      usage_error("{} {} names the same file as {} {}{}: each output needs its own file (one would overwrite the "
                  "other)",
                  n.flag, n.path, o.flag, o.path, how);
    }
    seen.push_back(n);
  }
}

}  // namespace ptdp
