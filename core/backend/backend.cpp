#include "core/backend/backend.h"

#include <chrono>

namespace ptdp {

int64_t Backend::mark() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Backend::elapsed_ms(int64_t from, int64_t to) { return double(to - from) / 1e6; }

}  // namespace ptdp
