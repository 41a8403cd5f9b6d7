// vgpu: NVTX ranges have no profiler to go to on the virtual GPU; the calls are checked for
// balance per host thread (a pop without a push is reported) and otherwise do nothing.
#pragma once

namespace vgpu {
int nvtx_push(const char* name);
int nvtx_pop();
}  // namespace vgpu

inline int nvtxRangePushA(const char* message) { return ::vgpu::nvtx_push(message); }
inline int nvtxRangePop(void) { return ::vgpu::nvtx_pop(); }
