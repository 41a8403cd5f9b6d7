// While a kernel runs on a worker thread, a SIGSEGV or SIGBUS first prints the kernel, its launch
// site, the block and the thread (and whether a fiber stack overflowed), then dies as before.
#pragma once
#include <vgpu/launch.h>

namespace vgpu::kernel {

class StackPool;

class CrashScope {
 public:
  CrashScope(const detail::KernelSpec& spec, const StackPool& stacks);
  ~CrashScope();
  CrashScope(const CrashScope&) = delete;
  CrashScope& operator=(const CrashScope&) = delete;
};

}  // namespace vgpu::kernel
