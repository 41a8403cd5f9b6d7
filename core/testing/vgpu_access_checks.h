// The virtual GPU's per-access kernel checks (vgpu/README.md, "Kernel memory accesses") off for a
// scope (tests whose subject is not the kernels), or left as they are; nothing outside the
// virtual-GPU build.
#pragma once
#ifdef PTDP_VGPU
#include <vgpu/runtime.h>
#endif

namespace ptdp::testing {

class VgpuAccessChecks {
 public:
  explicit VgpuAccessChecks(bool on) {
#ifdef PTDP_VGPU
    was_ = vgpu::access_checks();
    vgpu::set_access_checks(on && was_);  // never on where VGPU_ACCESS_CHECK=0 turned them off
#else
    (void)on;
#endif
  }
  ~VgpuAccessChecks() {
#ifdef PTDP_VGPU
    vgpu::set_access_checks(was_);
#endif
  }
  VgpuAccessChecks(const VgpuAccessChecks&) = delete;
  VgpuAccessChecks& operator=(const VgpuAccessChecks&) = delete;

 private:
  bool was_ = true;
};

}  // namespace ptdp::testing
