// The kernel executor: runs every block of a grid on the calling thread, one block at a time,
// each CUDA thread a fiber; barriers and warp operations switch fibers and are checked.
#pragma once
#include <cuda_runtime.h>
#include <vgpu/launch.h>

#include <memory>
#include <string>
#include <utility>

#include "kernel/access_check.h"

namespace vgpu::kernel {

// Runs the grid synchronously. A violation (barrier or warp divergence, deadlock, an exception
// escaping the kernel) is reported through vgpu::report_violation and stops the kernel with
// cudaErrorLaunchFailure; the remaining blocks do not run.
cudaError_t run_grid(const detail::KernelSpec& spec, detail::ThreadBody body, const void* closure);

// Whether the last grid run_grid ran on this thread had its loads and stores checked one by one
// (access_check.h: its code is instrumented and the checks are on); its writes are then marked
// initialised exactly.
bool last_grid_tracked();
// The stores of the last grid run_grid ran on this thread, as far as its code is instrumented
// (access_check.h; empty for code without the instrumentation), sorted and merged.
const AccessLog& last_grid_writes();
// Its loads of device or pinned memory, likewise.
const AccessLog& last_grid_reads();
// "kernel NAME (launched at FILE:LINE)", for messages.
std::string describe_kernel(const detail::KernelSpec& spec);

// For tests of the executor alone: runs kernel(args...) over grid x block now, on this thread,
// without a stream and without the launch checks.
template <class... P, class... A>
cudaError_t run_kernel_sync(const char* name, dim3 grid, dim3 block, void (*kernel)(P...), A&&... args) {
  using C = detail::Closure<void (*)(P...), std::tuple<std::decay_t<P>...>>;
  const C closure{kernel, detail::pack_args<P...>(std::forward<A>(args)...)};
  detail::KernelSpec spec;
  spec.name = name;
  spec.grid = grid;
  spec.block = block;
  spec.closure_bytes = sizeof(C);
  return run_grid(spec, &detail::run_closure<C>, &closure);
}

}  // namespace vgpu::kernel
