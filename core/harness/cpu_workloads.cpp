#include "core/harness/cpu_workloads.h"

#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/backend/cpu/blas.h"
#include "core/common/error.h"

namespace ptdp::harness {

Workload sgemm(int64_t m, int64_t n, int64_t k) {
  struct Buffers {
    std::vector<float> x, w, y;
  };
  auto s = std::make_shared<Buffers>();
  Workload wl;
  wl.work = 2.0 * m * n * k;
  wl.init = [s, m, n, k] {
    s->x.assign(m * k, 0.01f);
    s->w.assign(n * k, 0.02f);
    s->y.assign(m * n, 0.0f);
  };
  wl.run = [s, m, n, k] {
    cpu::gemm<float>(false, true, m, n, k, 1.0f, s->x.data(), k, s->w.data(), k, 0.0f, s->y.data(), n);
  };
  wl.check = [s, m, n, k]() -> int64_t {
    const double want = double(k) * 0.01f * 0.02f;
    const std::vector<float>& y = s->y;
    if (std::fabs(y[0] - want) > 1e-3 * want || std::fabs(y[m * n - 1] - want) > 1e-3 * want)
      throw RuntimeError(fmt::format("sgemm check failed: y[0] = {}, expected {}", y[0], want));
    return 0;
  };
  return wl;
}

namespace {

// Three f32 arrays of n elements, a = 0, b = 1, c = 2, each page first touched by the OpenMP
// thread that later reads or writes it (static schedule).
struct Arrays {
  int64_t n;
  std::unique_ptr<float[]> a{new float[n]}, b{new float[n]}, c{new float[n]};
  explicit Arrays(int64_t elems) : n(elems) {
    float* pa = a.get();
    float* pb = b.get();
    float* pc = c.get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      pa[i] = 0.0f;
      pb[i] = 1.0f;
      pc[i] = 2.0f;
    }
  }
  // a = op(b, c), element by element, each thread over the pages it first touched.
  template <class Op>
  void assign(Op op) {
    float* pa = a.get();
    const float* pb = b.get();
    const float* pc = c.get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = op(pb[i], pc[i]);
  }
};

// A STREAM kernel over arrays made by init, moving `arrays` of them per pass, and its check.
Workload stream(int64_t n, int arrays, void (*kernel)(Arrays&), int64_t (*check)(const Arrays&)) {
  auto s = std::make_shared<std::unique_ptr<Arrays>>();
  Workload w;
  w.work = double(arrays) * double(n) * sizeof(float);
  w.init = [s, n] { *s = std::make_unique<Arrays>(n); };
  w.run = [s, kernel] { kernel(**s); };
  if (check) w.check = [s, check] { return check(**s); };
  return w;
}

}  // namespace

Workload stream_triad(int64_t n) {
  return stream(
      n, 3, [](Arrays& s) { s.assign([](float b, float c) { return b + 3.0f * c; }); },
      [](const Arrays& s) -> int64_t {
        if (s.a[s.n / 2] != 7.0f) throw RuntimeError("STREAM triad check failed");
        return 0;
      });
}

Workload stream_copy(int64_t n) {
  return stream(n, 2, [](Arrays& s) { s.assign([](float b, float) { return b; }); }, nullptr);
}

}  // namespace ptdp::harness
