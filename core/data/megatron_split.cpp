#include "core/data/megatron_split.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/common/error.h"
#include "core/data/numpy_sum.h"

namespace ptdp {

const char* megatron_split_name(MegatronSplit s) {
  switch (s) {
    case MegatronSplit::Train: return "train";
    case MegatronSplit::Valid: return "valid";
    case MegatronSplit::Test: return "test";
  }
  return "";
}

std::array<double, 3> parse_megatron_split(std::string_view text, std::string_view flag) {
  const auto bad = [&](std::string_view why) -> void {
    usage_error("{} '{}': {} (expected 1 to 3 non-negative numbers separated by ',' such as 949,50,1)", flag,
                text, why);
  };
  std::vector<double> w;
  size_t at = 0;
  while (true) {
    const size_t stop = text.find_first_of(",/", at);
    std::string_view piece = text.substr(at, stop == std::string_view::npos ? std::string_view::npos : stop - at);
    while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);  // Megatron's default is "969, 30, 1"
    while (!piece.empty() && piece.back() == ' ') piece.remove_suffix(1);
    const std::string item(piece);
    const bool digits = !item.empty() && item.find_first_not_of("0123456789.") == std::string::npos &&
                        item.find_first_of("0123456789") != std::string::npos;
    if (!digits) bad(item.empty() ? "an empty weight" : "'" + item + "' is not a non-negative decimal number");
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size() || !std::isfinite(v))
      bad("'" + item + "' is not a non-negative decimal number");
    w.push_back(v);
    if (stop == std::string_view::npos) break;
    at = stop + 1;
  }
  if (w.size() > 3) bad("more than 3 weights");
  w.resize(3, 0.0);
  if (w[0] + w[1] + w[2] <= 0.0) bad("the weights sum to 0");
  const auto n = numpy_normalize(w);
  return {n[0], n[1], n[2]};
}

std::optional<SequenceRange> megatron_split_range(const std::array<double, 3>& split, MegatronSplit which,
                                                  int64_t num_sequences) {
  // Bookends: the cumulative sums 0, a0, a0+a1, a0+a1+a2 (left to right, as Python's reduce).
  double lo = 0.0;
  const int k = static_cast<int>(which);
  for (int i = 0; i < k; ++i) lo = lo + split[i];
  const double hi = lo + split[k];
  if (hi <= lo) return std::nullopt;
  // Python's round(): to nearest, ties to even (the default floating-point rounding mode).
  const auto at = [&](double f) { return static_cast<int64_t>(std::nearbyint(f * static_cast<double>(num_sequences))); };
  return SequenceRange{at(lo), at(hi)};
}

}  // namespace ptdp
