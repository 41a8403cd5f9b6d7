// SIGSEGV/SIGBUS reporting for kernels (see crash_handler.h). The handler runs on an alternate
// signal stack (a fiber stack may be the one that overflowed), uses only async-signal-safe calls,
// then restores the previous disposition and returns, so the fault repeats and ends the process
// as it would have (or reaches a sanitizer's handler).
#include "kernel/crash_handler.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernel/stack_pool.h"
#include "runtime/protect.h"

namespace vgpu::kernel {
namespace {

#define VGPU_IE_ __attribute__((tls_model("initial-exec")))
VGPU_IE_ thread_local const detail::KernelSpec* t_spec = nullptr;
VGPU_IE_ thread_local const StackPool* t_stacks = nullptr;
#undef VGPU_IE_

struct sigaction g_previous[2];
std::once_flag g_install_once;

struct Buffer {  // async-signal-safe formatting
  char data[1024];
  size_t n = 0;
  void add(const char* s) {
    while (s && *s && n + 1 < sizeof data) data[n++] = *s++;
  }
  void add_unsigned(uint64_t v, int base = 10) {
    char tmp[24];
    int k = 0;
    do {
      const int d = static_cast<int>(v % base);
      tmp[k++] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
      v /= base;
    } while (v && k < 24);
    while (k > 0 && n + 1 < sizeof data) data[n++] = tmp[--k];
  }
  void add_dim(unsigned x, unsigned y, unsigned z) {
    add("(");
    add_unsigned(x);
    add(",");
    add_unsigned(y);
    add(",");
    add_unsigned(z);
    add(")");
  }
};

void on_fault(int sig, siginfo_t* info, void* ctx) {
  const int saved_errno = errno;
  if (rt::on_device_memory_fault(sig, info, ctx)) {  // device memory's protection (runtime/protect.h)
    errno = saved_errno;
    return;
  }
  const int slot = sig == SIGSEGV ? 0 : 1;
  if (const detail::KernelSpec* spec = t_spec) {
    Buffer b;
    b.add("vgpu: kernel ");
    b.add(spec->name);
    if (spec->file) {
      b.add(" (launched at ");
      b.add(spec->file);
      b.add(":");
      b.add_unsigned(static_cast<uint64_t>(spec->line));
      b.add(")");
    }
    b.add(sig == SIGSEGV ? " crashed with SIGSEGV" : " crashed with SIGBUS");
    b.add(" (invalid memory access) at address 0x");
    b.add_unsigned(reinterpret_cast<uintptr_t>(info->si_addr), 16);
    b.add(" in block ");
    b.add_dim(blockIdx.x, blockIdx.y, blockIdx.z);
    b.add(", thread ");
    b.add_dim(threadIdx.x, threadIdx.y, threadIdx.z);
    if (t_stacks && t_stacks->in_guard(info->si_addr))
      b.add(": the address is in the guard page below a fiber stack, so the thread overflowed its 64 KiB stack");
    b.add("\n");
    ssize_t ignored = write(STDERR_FILENO, b.data, b.n);
    (void)ignored;
  }
  struct sigaction prev = g_previous[slot];
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) prev.sa_handler = SIG_DFL;
  sigaction(sig, &prev, nullptr);
  errno = saved_errno;
}

void install() {
  std::call_once(g_install_once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous[0]);
    sigaction(SIGBUS, &sa, &g_previous[1]);
  });
}

// One alternate signal stack per worker thread that runs kernels, unless it has one already.
struct AltStack {
  void* memory = nullptr;
  AltStack() {
    stack_t current;
    if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
    const size_t bytes = 256 * 1024;  // a report of a host access may run here
    memory = std::malloc(bytes);
    if (!memory) return;
    stack_t st;
    st.ss_sp = memory;
    st.ss_size = bytes;
    st.ss_flags = 0;
    if (sigaltstack(&st, nullptr) != 0) {
      std::free(memory);
      memory = nullptr;
    }
  }
  ~AltStack() {
    if (!memory) return;
    stack_t st;
    std::memset(&st, 0, sizeof st);
    st.ss_flags = SS_DISABLE;
    sigaltstack(&st, nullptr);
    std::free(memory);
  }
};

}  // namespace

CrashScope::CrashScope(const detail::KernelSpec& spec, const StackPool& stacks) {
  install();
  static thread_local AltStack alt_stack;
  (void)alt_stack;
  t_spec = &spec;
  t_stacks = &stacks;
}

CrashScope::~CrashScope() {
  t_spec = nullptr;
  t_stacks = nullptr;
}

}  // namespace vgpu::kernel
