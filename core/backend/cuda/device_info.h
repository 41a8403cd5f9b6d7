// CUDA devices present at run time. Built only with the CUDA backend (PTDP_HAVE_CUDA); with no
// driver or no GPU the count is 0 and `reason` says why, so GPU tests can skip with it.
#pragma once
#include <string>

namespace ptdp::cuda {

int device_count(std::string* reason = nullptr);
std::string device_name(int device);
// Runtime and driver versions, e.g. "runtime 13.0, driver 13.0"; "no driver" when absent.
std::string versions();

}  // namespace ptdp::cuda
