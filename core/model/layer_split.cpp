#include "core/model/layer_split.h"

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {
int middle_stages(const LayerSplit& s) { return s.p - (s.first > 0) - (s.last > 0); }
int middle_layers(const LayerSplit& s) { return s.layers - s.first - s.last; }
}  // namespace

std::string layer_split_error(const LayerSplit& s) {
  if (s.layers < 1 || s.p < 1 || s.v < 1) return fmt::format("{} layers over {} stages of {} chunks", s.layers, s.p, s.v);
  if (s.first < 0 || s.last < 0)
    return fmt::format("--decoder-first-pipeline-num-layers {} and --decoder-last-pipeline-num-layers {} must not be "
                       "negative (0: an even share)",
                       s.first, s.last);
  if (!s.uneven()) {
    if (s.layers % (s.p * s.v) == 0) return "";
    if (s.v == 1) return fmt::format("--pp {} must divide --layers {}", s.p, s.layers);
    return fmt::format("--pp {} x --vpp {} must divide --layers {}", s.p, s.v, s.layers);
  }
  if (s.p < 2)
    return fmt::format("--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers need --pp >= 2 (this "
                       "run has --pp {})",
                       s.p);
  const int m = middle_stages(s), rest = middle_layers(s);
  if (rest < 0 || (m == 0 && rest != 0))
    return fmt::format("--decoder-first-pipeline-num-layers {} + --decoder-last-pipeline-num-layers {} must {} --layers "
                       "{} (--pp {})",
                       s.first, s.last, m == 0 ? "equal" : "not exceed", s.layers, s.p);
  if (m > 0 && (rest == 0 || rest % m != 0))
    return fmt::format("the {} layers left after the first and last stages must divide evenly over the other {} "
                       "stage(s), at least one each (--layers {}, --decoder-first-pipeline-num-layers {}, "
                       "--decoder-last-pipeline-num-layers {}, --pp {})",
                       rest, m, s.layers, s.first, s.last, s.p);
  for (int r = 0; r < s.p; ++r)
    if (stage_layer_count(s, r) % s.v != 0)
      return fmt::format("--vpp {} must divide stage {}'s {} layers (each of its chunks holds an equal share)", s.v, r,
                         stage_layer_count(s, r));
  return "";
}

int stage_layer_count(const LayerSplit& s, int stage) {
  if (stage == 0 && s.first > 0) return s.first;
  if (stage == s.p - 1 && s.last > 0) return s.last;
  const int m = middle_stages(s);
  return m > 0 ? middle_layers(s) / m : 0;
}

LayerRange chunk_layers(const LayerSplit& s, int stage, int chunk) {
  PTDP_CHECK(layer_split_error(s).empty(), "invalid layer split: {}", layer_split_error(s));
  PTDP_CHECK(stage >= 0 && stage < s.p && chunk >= 0 && chunk < s.v, "stage {} chunk {}", stage, chunk);
  // Per chunk j: every stage's chunk j holds its stage's share / v, in stage order.
  int begin = 0;
  for (int r = 0; r < s.p; ++r) begin += chunk * (stage_layer_count(s, r) / s.v);
  for (int r = 0; r < stage; ++r) begin += stage_layer_count(s, r) / s.v;
  return {begin, begin + stage_layer_count(s, stage) / s.v};
}

std::string describe_stages(const LayerSplit& s) {
  if (!s.uneven()) return "";
  const int m = middle_stages(s);
  std::string out = s.first > 0 ? fmt::format("{}", s.first) : "";
  if (m > 0) out += fmt::format("{}{}{}", out.empty() ? "" : " | ", stage_layer_count(s, s.first > 0 ? 1 : 0),
                                m > 1 ? fmt::format(" x {}", m) : "");
  if (s.last > 0) out += fmt::format(" | {}", s.last);
  return out;
}

}  // namespace ptdp
