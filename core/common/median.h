// The median of a sample: what ptdp reports of repeated timings (a run's timed iterations, a
// benchmark's repetitions, the samples of a regression check).
#pragma once
#include <vector>

namespace ptdp {

// The median of a non-empty sample (the mean of the middle two for an even count).
double median(std::vector<double> v);

}  // namespace ptdp
