// NVTX ranges for profilers (Nsight Systems): `ptdp::NvtxRange r("forward");` marks the scope.
// With the CUDA backend built (PTDP_HAVE_CUDA) it uses header-only NVTX3; otherwise it is empty.
#pragma once
#include <string>

#ifdef PTDP_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace ptdp {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef PTDP_HAVE_CUDA
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  explicit NvtxRange(const std::string& name) : NvtxRange(name.c_str()) {}
  ~NvtxRange() {
#ifdef PTDP_HAVE_CUDA
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace ptdp
