// Reading a file the user names: it must be a regular file. A directory opened as a stream reads
// as empty (so it was called "truncated"), a FIFO or a device can block or never end.
#pragma once
#include <string>

namespace ptdp {

// UsageError "WHAT PATH: REASON" unless PATH is a regular file that can be opened for reading;
// REASON is "No such file or directory", "is a directory, not a file", "is not a regular file
// (a FIFO, socket or device)" or the system's reason. WHAT names the input ("--hardware",
// "spec", "--load ck:").
void require_regular_file(const std::string& path, const std::string& what);

// The whole content of PATH after require_regular_file; a read error is a UsageError too.
std::string read_regular_file(const std::string& path, const std::string& what);

}  // namespace ptdp
