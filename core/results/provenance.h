// Where a result came from: git sha of the build, host name, device name, UTC timestamp.
#pragma once
#include <string>

namespace ptdp {

std::string git_sha();
std::string host_name();
std::string cpu_name();          // model name from /proc/cpuinfo
std::string utc_timestamp();     // ISO 8601, e.g. 2026-11-21T10:00:00Z

}  // namespace ptdp
