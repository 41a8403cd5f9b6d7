#include "core/common/source_tree.h"

#ifndef PTDP_SOURCE_DIR
#error "PTDP_SOURCE_DIR must be defined by the build"
#endif

namespace ptdp {

std::filesystem::path source_tree() {
  const std::filesystem::path root(PTDP_SOURCE_DIR);
  std::error_code ec;
  return std::filesystem::is_directory(root, ec) ? root : std::filesystem::path();
}

}  // namespace ptdp
