// NVTX push/pop on the virtual GPU: a per-thread depth, as nvtxRangePushA/Pop return it
// (the new depth for push, the depth before the pop for pop, -1 on a pop without a push).
#include <nvtx3/nvToolsExt.h>

#include <string>

#include "vgpu/runtime.h"

namespace vgpu {
namespace {
thread_local int depth = 0;
}

int nvtx_push(const char*) { return depth++; }

int nvtx_pop() {
  if (depth == 0) {
    report_violation("nvtx", "nvtxRangePop without a matching nvtxRangePushA on this host thread");
    return -1;
  }
  return --depth;
}

}  // namespace vgpu
