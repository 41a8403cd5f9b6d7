#include "core/common/error.h"

namespace ptdp {

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  throw RuntimeError(fmt::format("check failed: {} at {}:{}{}{}", cond, file, line,
                                 msg.empty() ? "" : ": ", msg));
}

}  // namespace ptdp
