// The source tree this build was configured from, where the project's data lies beside the code
// (hardware/, experiments/specs/, results/paper/, results/golden/): what a ptdp run from
// another directory falls back on. Set by CMake (PTDP_SOURCE_DIR), not taken from __FILE__,
// whose form depends on the compiler's invocation.
#pragma once
#include <filesystem>

namespace ptdp {

// The tree's root, or an empty path when it is not there any more (a binary moved elsewhere).
std::filesystem::path source_tree();

}  // namespace ptdp
