#include "core/testing/pairwise.h"

#include <array>
#include <set>
#include <utility>

namespace ptdp::testing {

namespace {

constexpr int kSettings = 6;
using Values = std::array<int, kSettings>;
using Pair = std::pair<std::pair<int, int>, std::pair<int, int>>;  // (setting, value), (setting, value)

Values values_of(const Layout& l) {
  return {int(l.schedule), l.pp, l.tp, l.dp, int(l.recompute), l.scatter_gather ? 1 : 0};
}

std::vector<Pair> pairs_of(const Layout& l) {
  const Values v = values_of(l);
  std::vector<Pair> out;
  for (int i = 0; i < kSettings; ++i)
    for (int j = i + 1; j < kSettings; ++j) out.push_back({{i, v[i]}, {j, v[j]}});
  return out;
}

}  // namespace

std::vector<Layout> pairwise_cover(const std::vector<Layout>& all) {
  std::set<Pair> uncovered;
  for (const Layout& l : all)
    for (const Pair& p : pairs_of(l)) uncovered.insert(p);
  std::vector<Layout> out;
  std::vector<bool> taken(all.size(), false);
  while (!uncovered.empty()) {
    size_t best = 0;
    int best_new = -1;
    for (size_t i = 0; i < all.size(); ++i) {
      if (taken[i]) continue;
      int fresh = 0;
      for (const Pair& p : pairs_of(all[i])) fresh += int(uncovered.count(p));
      if (fresh > best_new) best = i, best_new = fresh;
    }
    taken[best] = true;
    out.push_back(all[best]);
    for (const Pair& p : pairs_of(all[best])) uncovered.erase(p);
  }
  return out;
}

}  // namespace ptdp::testing
