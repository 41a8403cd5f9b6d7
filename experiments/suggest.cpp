#include "experiments/suggest.h"

#include <algorithm>
#include <vector>

namespace ptdp {

namespace {

// Optimal string alignment distance (Levenshtein with adjacent transpositions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string did_you_mean(const CLI::App& cmd, const std::string& flag) {
  const std::string name = flag.substr(0, flag.find('='));
  if (name.rfind("--", 0) != 0 || name.size() < 4) return "";
  const size_t limit = std::max<size_t>(2, name.size() / 4);
  size_t best = limit + 1;
  std::vector<std::string> closest;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& lname : opt->get_lnames()) {
      const std::string candidate = "--" + lname;
      // A prefix of a longer name ("--micro" for "--micro-batch") counts as close too.
      const size_t dist = candidate.rfind(name, 0) == 0 ? 1 : edit_distance(name, candidate);
      if (dist < best) best = dist, closest.clear();
      if (dist == best && std::find(closest.begin(), closest.end(), candidate) == closest.end())
        closest.push_back(candidate);
    }
  }
  if (closest.empty() || closest.size() > 3) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < closest.size(); ++i) out += (i ? " or " : "") + closest[i];
  return out + "?";
}

}  // namespace ptdp
