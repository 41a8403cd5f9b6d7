// Call sites: capture_site() keeps the raw return addresses of the host thread (cheap);
// Site::describe() symbolises and demangles them only when a report is printed.
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>

#include <cstdio>

#include <cstdlib>
#include <cstring>
#include <vgpu/runtime.h>

namespace vgpu {
namespace {
constexpr int kMaxFrames = 12;  // the caller and a few of its callers: unwinding costs ~0.3 us a frame

bool backtraces_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VGPU_BACKTRACE");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// "binary(mangled+0x1f) [0x...]" -> "demangled+0x1f (binary)"; unchanged when not that shape.
std::string readable(const char* sym) {
  std::string s = sym;
  const size_t open = s.find('('), plus = s.find('+', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return s;
  const std::string mangled = s.substr(open + 1, plus - open - 1);
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string name = (status == 0 && d) ? d : mangled;
  std::free(d);
  const size_t close = s.find(')', plus);
  const std::string offset = close == std::string::npos ? "" : s.substr(plus, close - plus);
  std::string binary = s.substr(0, open);
  const size_t slash = binary.rfind('/');
  if (slash != std::string::npos) binary = binary.substr(slash + 1);
  return name + offset + " (" + binary + ")";
}

// Frames of the vgpu's entry points (and what they call) say nothing about the caller.
bool api_frame(const std::string& r) {
  for (const char* prefix : {"vgpu::", "cuda", "nccl", "cublas", "std::", "void std::", "capture_site"})
    if (r.rfind(prefix, 0) == 0) return true;
  return false;
}
}  // namespace

// A site with file:line (kernel launches through PTDP_LAUNCH) needs no backtrace: backtrace()
// unwinds through DWARF tables and costs microseconds per call.
Site capture_site(std::string what, const char* file, int line) {
  Site s;
  s.what = std::move(what);
  s.file = file;
  s.line = line;
  if (!file && backtraces_enabled()) {
    void* buf[kMaxFrames];
    const int n = backtrace(buf, kMaxFrames);
    if (n > 1) s.frames.assign(buf + 1, buf + n);  // drop capture_site itself
  }
  return s;
}

std::string Site::describe() const {
  std::string out = what.empty() ? std::string("(unnamed call)") : what;
  if (file) out += " at " + std::string(file) + ":" + std::to_string(line);
  if (frames.empty()) return out;
  char** syms = backtrace_symbols(frames.data(), static_cast<int>(frames.size()));
  if (!syms) return out;
  std::vector<std::string> names;
  for (size_t i = 0; i < frames.size(); ++i) names.push_back(readable(syms[i]));
  std::free(syms);
  // Start after the last vgpu/API frame near the top: the caller of the API comes next (the
  // vgpu's own static functions have no names in backtrace_symbols, so they cannot be told apart
  // from the caller's; the API frame is the landmark).
  size_t first = 0;
  for (size_t i = 0; i < names.size() && i < 10; ++i)
    if (api_frame(names[i])) first = i + 1;
  int shown = 0;
  for (size_t i = first; i < names.size() && shown < 8; ++i) {
    if (names[i].find("__libc_start") != std::string::npos || names[i].find("start_thread") != std::string::npos ||
        names[i].find("libc.so") != std::string::npos)
      break;
    out += "\n      #" + std::to_string(shown++) + " " + names[i];
  }
  return out;
}

std::string describe_code_address(const void* pc) {
  void* frame = const_cast<void*>(pc);
  char** sym = backtrace_symbols(&frame, 1);
  std::string fallback = sym ? readable(sym[0]) : "?";
  std::free(sym);
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname || !info.dli_fbase) return fallback;
  // The return address of the hook: the instruction after the access's call, in its statement.
  // A position-independent binary's line table has addresses relative to its load address.
  const bool relative = static_cast<const Elf64_Ehdr*>(info.dli_fbase)->e_type == ET_DYN;
  const auto addr = reinterpret_cast<uintptr_t>(pc) - 1 - (relative ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0);
  char cmd[1200];
  std::snprintf(cmd, sizeof cmd, "addr2line -C -f -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
                static_cast<unsigned long>(addr));
  FILE* f = ::popen(cmd, "r");
  if (!f) return fallback;
  char fn[4096] = "", where[4096] = "";
  const bool ok = std::fgets(fn, sizeof fn, f) && std::fgets(where, sizeof where, f);
  ::pclose(f);
  if (!ok || where[0] == '?') return fallback;
  auto chomp = [](char* s) { s[std::strcspn(s, "\n")] = 0; };
  chomp(fn);
  chomp(where);
  std::string w = where;
  const size_t disc = w.find(" (discriminator");
  if (disc != std::string::npos) w.resize(disc);
  return w + " (" + fn + ")";
}

}  // namespace vgpu
