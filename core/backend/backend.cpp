#include "core/backend/backend.h"

#include <chrono>

namespace ptdp {

int64_t Backend::mark() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Backend::elapsed_ms(int64_t from, int64_t to) { return double(to - from) / 1e6; }

Tensor to_backend(Backend& be, const Tensor& t) {
  if (t.device() == be.device()) return t;
  Tensor d = be.empty(t.shape(), t.dtype());
  be.copy(d, t);
  return d;
}

Tensor to_host(Backend& be, const Tensor& t) {
  if (t.device() == Device::CPU) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(h, t);
  return h;
}

}  // namespace ptdp
