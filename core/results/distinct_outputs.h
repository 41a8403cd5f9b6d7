// Two outputs of one command must be two files: --csv and --loss-log naming one file (directly,
// through a symlink or a hard link) would write one over the other and lose its rows.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ptdp {

// outputs: (flag, path) pairs, empty paths skipped. UsageError naming both flags and paths when
// two name the same file: the same absolute path once links are resolved, or (existing files)
// the same file system object.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace ptdp
