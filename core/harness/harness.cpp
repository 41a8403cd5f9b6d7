#include "core/harness/harness.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/common/error.h"
#include "core/common/median.h"

namespace ptdp::harness {

double Samples::best() const {
  PTDP_CHECK(!rates.empty(), "Samples::best: no repetition was measured");
  return *std::max_element(rates.begin(), rates.end());
}

double Samples::median() const {
  PTDP_CHECK(!rates.empty(), "Samples::median: no repetition was measured");
  return ptdp::median(rates);
}

Clock host_clock(std::function<void()> ready) {
  return {std::move(ready), [](const std::function<void()>& calls) {
            const auto t0 = std::chrono::steady_clock::now();
            calls();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          }};
}

int64_t prepare(const Workload& w, const Clock& clock, int warmup) {
  if (w.init) w.init();
  int64_t wrong = 0;
  if (w.check) {
    if (clock.ready) clock.ready();
    w.run();
    wrong = w.check();
  }
  for (int i = 0; i < warmup; ++i) w.run();
  return wrong;
}

double time_calls(const Workload& w, const Clock& clock, int calls, const Outside& outside) {
  if (w.reset || clock.ready) {
    const auto before = [&] {
      if (w.reset) w.reset();
      if (clock.ready) clock.ready();
    };
    if (outside) outside(before);
    else before();
  }
  const double seconds = clock.time([&] {
    for (int i = 0; i < calls; ++i) w.run();
  });
  return seconds / calls;
}

double alg_rate(const Workload& w, double seconds) { return w.work / seconds / w.unit; }
double bus_rate(const Workload& w, double seconds) { return alg_rate(w, seconds) * w.bus_factor; }

Measured measure(const Workload& w, const Clock& clock, int warmup, int reps) {
  Measured m;
  m.wrong = prepare(w, clock, warmup);
  for (int r = 0; r < reps; ++r) m.samples.rates.push_back(bus_rate(w, time_calls(w, clock)));
  return m;
}

}  // namespace ptdp::harness
