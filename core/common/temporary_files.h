// ptdp's temporaries of the files it writes whole and renames into place (the Megatron index
// cache, preprocess's .bin/.idx): PATH.ptdp-tmp.HOST.PID.N, a name that says whose it is. A run
// killed before its rename (kill -9, power loss, a full disk) leaves its temporary behind; the
// next run that writes in that directory removes those whose process is gone.
#pragma once
#include <functional>
#include <string>

namespace ptdp {

// PATH.ptdp-tmp.HOST.PID.N: this host, this process, and a counter of this process.
std::string temporary_path(const std::string& path);

// Removes from `dir` (not its subdirectories) ptdp's temporaries of the file names `ours`
// accepts, written on this host by a process that no longer runs; a temporary of another host
// (a shared directory) or of a live process is left alone. Also the names ptdp used before,
// NAME.tmp-PID-N and NAME.tmp.PID.N, under the same rule. Returns how many were removed.
int remove_dead_temporaries(const std::string& dir, const std::function<bool(const std::string&)>& ours);

}  // namespace ptdp
