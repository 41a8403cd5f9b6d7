// Device memory closed to host code (protect.h): protection keys where the CPU and kernel have
// them, else PROT_NONE views opened chunk by chunk for the threads that work on the device.
#include "runtime/protect.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "runtime/arena.h"
#include "runtime/registry.h"

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif

namespace vgpu::rt {
namespace {

#define VGPU_IE_ __attribute__((tls_model("initial-exec")))

constexpr size_t kChunk = size_t{256} << 10;  // what one fault opens (mprotect)
constexpr int kMaxOpen = 256;                 // chunks a thread keeps open before closing them all

struct OpenChunks {
  uintptr_t at[kMaxOpen];
  int n;
};
VGPU_IE_ constinit thread_local int t_depth = 0;  // DeviceAccess scopes open on this thread
VGPU_IE_ constinit thread_local bool t_lent = false;
VGPU_IE_ constinit thread_local OpenChunks t_open{};
VGPU_IE_ constinit thread_local bool t_keep_open = false;  // a stream worker (keep_open_between_items)
VGPU_IE_ constinit thread_local bool t_item = false;       // the outermost scope is an item's
VGPU_IE_ constinit thread_local int t_mark = 0;            // t_open.n when the outermost scope began
VGPU_IE_ constinit thread_local uint64_t t_open_gen = 0;   // g_close_gen when t_open was valid
std::atomic<bool> g_dirty{false};                          // something was opened since everything was closed
std::atomic<uint64_t> g_close_gen{0};                      // closes of everything: older t_open lists are void

// This thread's list, emptied if everything was closed since it was filled.
OpenChunks& my_open() {
  const uint64_t gen = g_close_gen.load(std::memory_order_relaxed);
  if (t_open_gen != gen) {
    t_open.n = 0;
    t_open_gen = gen;
  }
  return t_open;
}

Protection g_mode = Protection::Off;
int g_key = -1;
uintptr_t g_lo = 0, g_hi = 0;  // the protected views
struct sigaction g_previous;

// One mprotect per run of adjacent chunks, of those opened from the list's entry `from` on.
void close_opened(int from = 0) {
  my_open();
  if (from > t_open.n) from = t_open.n;
  uintptr_t* a = t_open.at + from;
  const int n = t_open.n - from;
  for (int i = 1; i < n; ++i)  // insertion sort: a few dozen entries
    for (int j = i; j > 0 && a[j - 1] > a[j]; --j) std::swap(a[j - 1], a[j]);
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && a[j] <= a[j - 1] + kChunk) ++j;
    ::mprotect(reinterpret_cast<void*>(a[i]), a[j - 1] + kChunk - a[i], PROT_NONE);
    i = j;
  }
  t_open.n = from;
}

bool is_open_here(uintptr_t chunk) {
  for (int i = 0; i < t_open.n; ++i)
    if (t_open.at[i] == chunk) return true;
  return false;
}

void open_chunk_at(uintptr_t a) {
  const uintptr_t c = g_lo + ((a - g_lo) & ~(kChunk - 1));
  OpenChunks& o = my_open();
  if (o.n == kMaxOpen) close_opened();
  g_dirty.store(true, std::memory_order_relaxed);
  ::mprotect(reinterpret_cast<void*>(c), kChunk, PROT_READ | PROT_WRITE);
  o.at[o.n++] = c;
}

// Closes what every thread opened, in one call (one TLB shootdown).
void close_everything() {
  if (!g_dirty.exchange(false)) return;
  g_close_gen.fetch_add(1);
  ::mprotect(reinterpret_cast<void*>(g_lo), g_hi - g_lo, PROT_NONE);
}

void set_access(bool on) {
  if (g_mode == Protection::Pkeys) ::pkey_set(g_key, on ? 0 : PKEY_DISABLE_ACCESS);
  else if (g_mode == Protection::Mprotect && !on)
    t_keep_open ? close_everything() : close_opened();  // a worker's chunks are not listed per item
}

bool in_protected(uintptr_t a) { return a >= g_lo && a < g_hi; }

#if defined(__x86_64__)
// The PKRU register's place in the XSAVE area of a signal frame (CPUID leaf 0xD, component 9).
unsigned pkru_offset() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid_count(0xd, 9, a, b, c, d);
  return b;
}
unsigned g_pkru_offset = 0;
#endif

// The faulting access goes on when the handler returns: the thread gets access in the frame the
// kernel restores (pkeys) or the chunk is opened (mprotect).
void lend_in_frame(uintptr_t addr, void* ucontext) {
  t_lent = true;
  if (g_mode == Protection::Mprotect) {
    open_chunk_at(addr);
    return;
  }
#if defined(__x86_64__)
  auto* uc = static_cast<ucontext_t*>(ucontext);
  auto* fp = reinterpret_cast<char*>(uc->uc_mcontext.fpregs);
  if (!fp || !g_pkru_offset) return;
  auto* xstate_bv = reinterpret_cast<uint64_t*>(fp + 512);
  *xstate_bv |= uint64_t{1} << 9;
  auto* pkru = reinterpret_cast<uint32_t*>(fp + g_pkru_offset);
  *pkru &= ~(3u << (2 * g_key));
#endif
}

// "byte offset N of allocation #M (...)" for a device address (registry not taken when busy:
// the faulting thread may be the one holding it).
std::string describe_address(const void* p) {
  std::shared_lock<std::shared_mutex> lock(registry().mu, std::try_to_lock);
  if (!lock.owns_lock()) return "device memory (its allocation unknown: the registry is busy)";
  const AllocRecord* a = find_locked(p);
  if (!a) a = find_near_locked(p);
  if (!a) return "device memory no allocation holds";
  return "byte offset " + std::to_string(offset_of(*a, p)) + " of " + describe_record(*a) + site_lines(*a);
}

// The host's frames: the backtrace past the signal frame, from the faulting function's caller on.
std::string callers(const void* rip) {
  Site s = capture_site("called from");
  for (size_t i = 0; i < s.frames.size(); ++i)
    if (s.frames[i] == rip) {
      s.frames.erase(s.frames.begin(), s.frames.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return s.describe();
    }
  return s.describe();
}

void report_fault(const void* addr, bool write, const void* rip) {
  // describe_code_address() looks up pc - 1 (a return address's call): here the faulting instruction.
  const void* pc = static_cast<const char*>(rip) + 1;
  std::ostringstream m;
  m << "the host " << (write ? "writes" : "reads") << " device memory at " << addr << ", " << describe_address(addr)
    << "\n  at " << describe_code_address(pc) << "\n  " << callers(rip)
    << "\nDevice memory is not accessible from the host: copy it with cudaMemcpy (CUDA C++ Programming Guide, "
       "Device Memory); on a GPU this access faults. (A test that touches device memory on purpose holds a "
       "vgpu::HostTouchesDeviceMemory.)";
  report_violation("host access to device memory", m.str());
}

void on_segv(int sig, siginfo_t* info, void* ucontext) {
  const int saved_errno = errno;
  if (on_device_memory_fault(sig, info, ucontext)) {
    errno = saved_errno;
    return;
  }
  // Not ours: the previous handler, or the default action (the fault repeats and ends the process).
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, ucontext);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
  errno = saved_errno;
}

void install_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = &on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, &g_previous);
}

Protection choose() {
  const char* v = std::getenv("VGPU_PROTECT");
  const std::string want = v ? v : "auto";
  if (want == "0" || want == "off") return Protection::Off;
  if (want == "mprotect") return Protection::Mprotect;
  g_key = ::pkey_alloc(0, PKEY_DISABLE_ACCESS);
  if (g_key >= 0) return Protection::Pkeys;
  if (want == "pkeys")
    std::fprintf(stderr, "vgpu: VGPU_PROTECT=pkeys: protection keys are not available (%s); using mprotect\n",
                 std::strerror(errno));
  return Protection::Mprotect;
}

}  // namespace

Protection protection() { return g_mode; }

void protect_views(char* base, size_t view_bytes, unsigned views) {
  const Protection mode = choose();
  if (mode == Protection::Off) return;
  // View 0 is the runtime's own (its records' addresses; cudaMalloc hands out views 1 and up):
  // it stays open, so that the runtime's copies and fills need not open anything (raw_memory.h).
  base += view_bytes;
  const size_t bytes = view_bytes * (views - 1);
  if (mode == Protection::Pkeys) {
#if defined(__x86_64__)
    g_pkru_offset = pkru_offset();
#endif
    if (::pkey_mprotect(base, bytes, PROT_READ | PROT_WRITE, g_key) != 0) return;
  } else if (::mprotect(base, bytes, PROT_NONE) != 0) {
    return;
  }
  g_lo = reinterpret_cast<uintptr_t>(base);
  g_hi = g_lo + bytes;
  install_handler();
  g_mode = mode;
  set_access(t_depth > 0);  // pkey_alloc closed the calling thread's access
}

DeviceAccess::DeviceAccess(bool keep_open) {
  if (t_depth++ == 0) {
    t_item = keep_open;
    t_mark = my_open().n;
    if (g_mode == Protection::Pkeys) set_access(true);
  }
}
DeviceAccess::~DeviceAccess() {
  if (--t_depth == 0) {
    if (g_mode != Protection::Mprotect)
      set_access(false);
    else if (!(t_keep_open || t_item) && my_open().n > t_mark)
      close_opened(t_mark);  // what this scope opened; the items' chunks before it wait for a synchronisation
    t_lent = false;
  }
}

void open_ahead(const void* p, size_t bytes) {
  if (g_mode != Protection::Mprotect || t_depth == 0 || bytes == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (!in_protected(a)) return;
  const size_t kAhead = size_t{16} << 20;  // the rest, if any, opens on first touch
  const uintptr_t first = g_lo + ((a - g_lo) & ~(kChunk - 1));
  uintptr_t end = a + std::min(bytes, kAhead);
  if (end > g_hi) end = g_hi;
  OpenChunks& o = my_open();
  for (uintptr_t c = first; c < end;) {
    while (c < end && is_open_here(c)) c += kChunk;
    uintptr_t run = c;
    while (run < end && !is_open_here(run) && o.n < kMaxOpen) o.at[o.n++] = run, run += kChunk;
    if (run > c) {
      g_dirty.store(true, std::memory_order_relaxed);
      ::mprotect(reinterpret_cast<void*>(c), run - c, PROT_READ | PROT_WRITE);
    }
    if (o.n == kMaxOpen) return;
    c = run;
  }
}

void keep_open_between_items() { t_keep_open = true; }
void host_synchronized() {
  if (g_mode == Protection::Mprotect && t_depth == 0 && !t_keep_open) close_everything();
}

HostCode::HostCode() : saved_(t_depth) {
  if (t_depth > 0) {
    t_depth = 0;
    set_access(false);
  }
}
HostCode::~HostCode() {
  if (saved_ > 0) {
    t_depth = saved_;
    t_lent = false;
    set_access(true);
  }
}

bool device_access_allowed() { return t_depth > 0; }

void start_without_device_access() {
  if (t_depth == 0) set_access(false);
}

void lend_device_access(const void* p, size_t bytes) {
  if (g_mode == Protection::Off || t_depth > 0) return;
  t_lent = true;
  if (g_mode == Protection::Pkeys) {
    set_access(true);
    return;
  }
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (!in_protected(a)) return;
  for (uintptr_t c = a & ~(kChunk - 1); c < a + bytes && in_protected(c) && t_open.n < kMaxOpen; c += kChunk)
    open_chunk_at(c < a ? a : c);
}

void end_lent_access() {
  if (!t_lent || t_depth > 0) return;
  set_access(false);
  t_lent = false;
}

bool on_device_memory_fault(int sig, siginfo_t* info, void* ucontext) {
  if (sig != SIGSEGV || g_mode == Protection::Off) return false;
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (!in_protected(addr)) return false;
  if (t_depth > 0) {  // a thread working for the device: its first touch of a closed chunk
    if (g_mode != Protection::Mprotect) return false;
    open_chunk_at(addr);
    return true;
  }
  bool write = false;
  const void* pc = nullptr;
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(ucontext);
  write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  pc = reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RIP]);
#endif
  report_fault(info->si_addr, write, pc);  // returns only while violations are captured
  lend_in_frame(addr, ucontext);
  return true;
}

}  // namespace vgpu::rt

namespace vgpu {
HostTouchesDeviceMemory::HostTouchesDeviceMemory() : access_(new rt::DeviceAccess) {}
HostTouchesDeviceMemory::~HostTouchesDeviceMemory() { delete static_cast<rt::DeviceAccess*>(access_); }
const char* device_memory_protection() {
  switch (rt::protection()) {
    case rt::Protection::Pkeys: return "pkeys";
    case rt::Protection::Mprotect: return "mprotect";
    default: return "off";
  }
}
}  // namespace vgpu
