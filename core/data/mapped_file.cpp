#include "core/data/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/common/error.h"

namespace ptdp {

// A mapped file that another process truncates turns reads past its new end into SIGBUS. The
// mapped ranges are registered; a SIGBUS inside one ends the process with one line naming the
// file and exit code 2; any other SIGBUS goes to the handler there was before, or the default.
namespace {

struct GuardedRange {
  std::atomic<const std::byte*> begin{nullptr};
  std::atomic<size_t> size{0};
  char path[512] = {0};
};
constexpr int kGuardSlots = 256;
GuardedRange g_ranges[kGuardSlots];
std::mutex g_guard_mu;
struct sigaction g_previous {};

void write_all(const char* s) {
  for (size_t n = std::strlen(s); n > 0;) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto* addr = static_cast<const std::byte*>(info->si_addr);
  for (const auto& r : g_ranges) {
    const std::byte* b = r.begin.load(std::memory_order_acquire);
    if (b != nullptr && addr >= b && addr < b + r.size.load(std::memory_order_relaxed)) {
      write_all("ptdp: error: ");
      write_all(r.path);
      write_all(": the file became shorter while it was being read (truncated or rewritten by another process?)\n");
      ::_exit(2);
    }
  }
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // returning re-runs the access, which now ends the process as usual
  }
}

void guard(const std::byte* data, size_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
  std::lock_guard<std::mutex> lock(g_guard_mu);
  for (auto& r : g_ranges)
    if (r.begin.load(std::memory_order_relaxed) == nullptr) {
      std::strncpy(r.path, path.c_str(), sizeof r.path - 1);
      r.size.store(size, std::memory_order_relaxed);
      r.begin.store(data, std::memory_order_release);
      return;
    }
  // Every slot taken: this map goes unguarded (a truncation then ends the process by SIGBUS).
}

void unguard(const std::byte* data) {
  std::lock_guard<std::mutex> lock(g_guard_mu);
  for (auto& r : g_ranges)
    if (r.begin.load(std::memory_order_relaxed) == data) {
      r.begin.store(nullptr, std::memory_order_release);
      return;
    }
}

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) usage_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    usage_error("{}: cannot open: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    usage_error("{}: cannot open: not a regular file", path);
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_SHARED, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw RuntimeError(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
    m.data_ = static_cast<const std::byte*>(p);
    guard(m.data_, m.size_, path);
  } else {
    ::close(fd);
  }
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) {
    unguard(data_);
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ptdp
