// All-pairs covering of a layout grid: the suites that repeat the CPU grid's layouts on another
// backend (the virtual GPU's CudaPtdp) check the device plumbing of every pair of settings
// without running every combination.
#pragma once
#include <vector>

#include "core/testing/parallel_run.h"

namespace ptdp::testing {

// A subset of `all` in which every pair of values that two settings (schedule, p, t, d, recompute
// mode, scatter/gather) take together in some layout of `all` is taken together in some layout of
// the subset. Greedy: each step keeps the layout covering the most pairs not yet covered, the
// first in `all`'s order on a tie, so the subset is the same on every run.
std::vector<Layout> pairwise_cover(const std::vector<Layout>& all);

}  // namespace ptdp::testing
