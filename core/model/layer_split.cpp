#include "core/model/layer_split.h"

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {
int middle_stages(const LayerSplit& s) { return s.p - (s.first > 0) - (s.last > 0); }
int middle_layers(const LayerSplit& s) { return s.layers - s.first - s.last; }
bool counts_edges(const LayerSplit& s) { return s.embedding || s.loss; }
// With the embedding or the loss counted: the "layers" of every chunk, the edges among them.
int counted_chunk(const LayerSplit& s) { return (s.layers + s.embedding + s.loss) / (s.p * s.v); }
const char* kEmbeddingFlag = "--account-for-embedding-in-pipeline-split";
const char* kLossFlag = "--account-for-loss-in-pipeline-split";

std::string counted_edges_error(const LayerSplit& s) {
  const std::string flags = s.embedding && s.loss ? fmt::format("{} and {}", kEmbeddingFlag, kLossFlag)
                                                  : (s.embedding ? kEmbeddingFlag : kLossFlag);
  if (s.first > 0 || s.last > 0)
    return fmt::format("{} cannot be combined with --decoder-first-pipeline-num-layers / "
                       "--decoder-last-pipeline-num-layers (as in Megatron-core)",
                       flags);
  const int counted = s.layers + s.embedding + s.loss;
  const std::string what = fmt::format("--layers {} + {} (the {} counted as a layer by {})", s.layers,
                                       s.embedding + s.loss, s.embedding && s.loss ? "embedding and the loss" : (s.embedding ? "embedding" : "loss"), flags);
  if (counted % (s.p * s.v) != 0)
    return s.v == 1 ? fmt::format("--pp {} must divide {} = {}", s.p, what, counted)
                    : fmt::format("--pp {} x --vpp {} must divide {} = {}", s.p, s.v, what, counted);
  if (counted_chunk(s) - (s.embedding && s.loss && s.p * s.v == 1 ? 2 : 1) < 1)
    return fmt::format("{} = {} over --pp {} x --vpp {} leaves a chunk without a transformer layer (each chunk "
                       "holds {}, one of them is the {})",
                       what, counted, s.p, s.v, counted_chunk(s), s.embedding ? "embedding" : "loss");
  return "";
}
}  // namespace

std::string layer_split_error(const LayerSplit& s) {
  if (s.layers < 1 || s.p < 1 || s.v < 1) return fmt::format("{} layers over {} stages of {} chunks", s.layers, s.p, s.v);
  if (s.first < 0 || s.last < 0)
    return fmt::format("--decoder-first-pipeline-num-layers {} and --decoder-last-pipeline-num-layers {} must not be "
                       "negative (0: an even share)",
                       s.first, s.last);
  if (counts_edges(s)) return counted_edges_error(s);
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
  if (counts_edges(s)) return counted_chunk(s) * s.v - (s.embedding && stage == 0) - (s.loss && stage == s.p - 1);
  if (stage == 0 && s.first > 0) return s.first;
  if (stage == s.p - 1 && s.last > 0) return s.last;
  const int m = middle_stages(s);
  return m > 0 ? middle_layers(s) / m : 0;
}

LayerRange chunk_layers(const LayerSplit& s, int stage, int chunk) {
  PTDP_CHECK(layer_split_error(s).empty(), "invalid layer split: {}", layer_split_error(s));
  PTDP_CHECK(stage >= 0 && stage < s.p && chunk >= 0 && chunk < s.v, "stage {} chunk {}", stage, chunk);
  if (counts_edges(s)) {  // transformer_layer.py get_transformer_layer_offset, transformer_block.py
    const int c = counted_chunk(s);
    const bool first = stage == 0 && chunk == 0, last = stage == s.p - 1 && chunk == s.v - 1;
    const int begin = chunk * s.p * c + stage * c - (s.embedding && !first);
    return {begin, begin + c - (s.embedding && first) - (s.loss && last)};
  }
  // Per chunk j: every stage's chunk j holds its stage's share / v, in stage order.
  int begin = 0;
  for (int r = 0; r < s.p; ++r) begin += chunk * (stage_layer_count(s, r) / s.v);
  for (int r = 0; r < stage; ++r) begin += stage_layer_count(s, r) / s.v;
  return {begin, begin + stage_layer_count(s, stage) / s.v};
}

std::string describe_stages(const LayerSplit& s) {
  if (!s.uneven()) return "";
  if (counts_edges(s)) {  // runs of equal stages: "3 | 4 x 2 | 3"
    std::string out;
    for (int r = 0; r < s.p;) {
      int e = r;
      while (e + 1 < s.p && stage_layer_count(s, e + 1) == stage_layer_count(s, r)) ++e;
      out += fmt::format("{}{}{}", out.empty() ? "" : " | ", stage_layer_count(s, r),
                         e > r ? fmt::format(" x {}", e - r + 1) : "");
      r = e + 1;
    }
    return out;
  }
  const int m = middle_stages(s);
  std::string out = s.first > 0 ? fmt::format("{}", s.first) : "";
  if (m > 0) out += fmt::format("{}{}{}", out.empty() ? "" : " | ", stage_layer_count(s, s.first > 0 ? 1 : 0),
                                m > 1 ? fmt::format(" x {}", m) : "");
  if (s.last > 0) out += fmt::format(" | {}", s.last);
  return out;
}

}  // namespace ptdp
