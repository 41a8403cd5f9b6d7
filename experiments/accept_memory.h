// The memory `ptdp accept`'s checks hold, checked against what this machine has before anything
// is allocated: a size the profile allows (accept_profile.h's bounds) that this machine cannot
// hold is a usage error naming the field and the size, not a std::bad_alloc or an out-of-memory
// kill halfway through the run.
#pragma once
#include <functional>
#include <string>

#include "experiments/accept_profile.h"

namespace ptdp {

// The most one check holds at once (the checks run one after another), and which field sets it.
struct MemoryNeed {
  double bytes = 0;
  std::string what;  // e.g. "the memory check: 3 arrays of accept.memory.array_mib = 65536 MiB"
};

// Of the checks `wanted` names: on the host for a CPU profile (its `ranks` ranks' buffers
// together), on each GPU for a GPU profile.
MemoryNeed largest_memory_need(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted);

// What can be allocated now, and where that figure comes from ("MemAvailable in /proc/meminfo",
// "free on GPU 0, cudaMemGetInfo"); bytes < 0 when unknown.
struct MemoryAvailable {
  double bytes = -1;
  std::string source;
};

// The host: MemAvailable of /proc/meminfo (or of PTDP_MEMINFO's text in that format, for tests),
// else sysconf's available pages.
MemoryAvailable host_memory_available();

// UsageError "--hardware FLAG: NEED.what needs X GiB, more than the Y GiB available (source)"
// when the need exceeds what is available; nothing when what is available is unknown.
void check_memory_need(const std::string& hardware_flag, const MemoryNeed& need, const MemoryAvailable& have);

}  // namespace ptdp
