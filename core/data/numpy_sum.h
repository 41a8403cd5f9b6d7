// numpy.sum of a float64 vector (0.0 plus NumPy's pairwise summation: blocks of 8 partial sums,
// halves above 128 items) and Megatron-core's normalize (w / numpy.sum(w)), bit for bit: the
// split and blend weights Megatron derives from them decide sample counts.
#pragma once
#include <span>
#include <vector>

namespace ptdp {

double numpy_sum(std::span<const double> a);
std::vector<double> numpy_normalize(std::span<const double> w);

}  // namespace ptdp
