#include "core/model/layer_split.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {
int middle_stages(const LayerSplit& s) { return s.p - (s.first > 0) - (s.last > 0); }
int middle_layers(const LayerSplit& s) { return s.layers - s.first - s.last; }
bool counts_edges(const LayerSplit& s) { return s.embedding || s.loss; }
bool has_layout(const LayerSplit& s) { return !s.chunks.empty(); }

std::string layout_error(const LayerSplit& s) {
  if (s.first > 0 || s.last > 0 || counts_edges(s))
    return "--pipeline-model-parallel-layout cannot be combined with --decoder-first-pipeline-num-layers, "
           "--decoder-last-pipeline-num-layers or --account-for-*-in-pipeline-split (as in Megatron-core)";
  if (int(s.chunks.size()) != s.p * s.v)
    return fmt::format("--pipeline-model-parallel-layout has {} virtual stages, --pp {} x --vpp {} = {}",
                       s.chunks.size(), s.p, s.v, s.p * s.v);
  int sum = 0;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const bool edge = i == 0 || i + 1 == s.chunks.size();  // the embedding's or the loss's virtual stage
    if (s.chunks[i] < (edge ? 0 : 1))
      return "--pipeline-model-parallel-layout: every virtual stage but the first (the embedding's) and the last "
             "(the loss's) needs a transformer layer";
    sum += s.chunks[i];
  }
  if (sum != s.layers)
    return fmt::format("--pipeline-model-parallel-layout holds {} transformer layers, --layers is {}", sum, s.layers);
  return "";
}
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
  // A chunk of one counted layer that is the embedding (the loss) holds no transformer layer: a
  // standalone embedding (loss) stage, as Megatron-core allows.
  return "";
}
}  // namespace

std::string layer_split_error(const LayerSplit& s) {
  if (s.layers < 1 || s.p < 1 || s.v < 1) return fmt::format("{} layers over {} stages of {} chunks", s.layers, s.p, s.v);
  if (s.first < 0 || s.last < 0)
    return fmt::format("--decoder-first-pipeline-num-layers {} and --decoder-last-pipeline-num-layers {} must not be "
                       "negative (0: an even share)",
                       s.first, s.last);
  if (has_layout(s)) return layout_error(s);
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
  if (has_layout(s)) {
    int n = 0;
    for (int j = 0; j < s.v; ++j) n += s.chunks[size_t(j) * s.p + stage];
    return n;
  }
  if (counts_edges(s)) return counted_chunk(s) * s.v - (s.embedding && stage == 0) - (s.loss && stage == s.p - 1);
  if (stage == 0 && s.first > 0) return s.first;
  if (stage == s.p - 1 && s.last > 0) return s.last;
  const int m = middle_stages(s);
  return m > 0 ? middle_layers(s) / m : 0;
}

LayerRange chunk_layers(const LayerSplit& s, int stage, int chunk) {
  PTDP_CHECK(layer_split_error(s).empty(), "invalid layer split: {}", layer_split_error(s));
  PTDP_CHECK(stage >= 0 && stage < s.p && chunk >= 0 && chunk < s.v, "stage {} chunk {}", stage, chunk);
  if (has_layout(s)) {  // pipeline_parallel_layer_layout.py get_layer_offset: every virtual stage before
    const size_t at = size_t(chunk) * s.p + stage;
    int begin = 0;
    for (size_t i = 0; i < at; ++i) begin += s.chunks[i];
    return {begin, begin + s.chunks[at]};
  }
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
  if (counts_edges(s) || has_layout(s)) {  // runs of equal stages: "3 | 4 x 2 | 3"
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

namespace {

constexpr const char* kLayoutFlag = "--pipeline-model-parallel-layout";
constexpr size_t kMaxLayout = 1 << 22;  // characters once unrolled

// "(...)*n" (pass 1) or "x*n" (pass 2) unrolled in one left-to-right pass, as re.sub does.
std::string unroll(const std::string& in, bool groups, const std::string& layout) {
  std::string out;
  size_t i = 0;
  auto repeat = [&](size_t at, size_t& end) -> long long {  // "*digits" at `at`, or -1
    if (at >= in.size() || in[at] != '*' || at + 1 >= in.size() || !std::isdigit(uint8_t(in[at + 1]))) return -1;
    end = at + 1;
    long long n = 0;
    while (end < in.size() && std::isdigit(uint8_t(in[end]))) {
      n = n * 10 + (in[end++] - '0');
      if (n > static_cast<long long>(kMaxLayout)) usage_error("{} '{}': a repeat count beyond {}", kLayoutFlag, layout, kMaxLayout);
    }
    return n;
  };
  while (i < in.size()) {
    size_t end = 0;
    std::string unit;
    long long n = -1;
    if (groups && in[i] == '(') {
      const size_t close = in.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && (n = repeat(close + 1, end)) >= 0)
        unit = in.substr(i + 1, close - i - 1);
    } else if (!groups && (n = repeat(i + 1, end)) >= 0) {
      unit = in.substr(i, 1);
    }
    if (n < 0) {
      out += in[i++];
      continue;
    }
    if (out.size() + unit.size() * size_t(n) > kMaxLayout)
      usage_error("{} '{}' unrolls to more than {} characters", kLayoutFlag, layout, kMaxLayout);
    for (long long k = 0; k < n; ++k) out += unit;
    i = end;
  }
  return out;
}

}  // namespace

std::vector<int> parse_pipeline_layout(const std::string& layout, int p, int layers) {
  std::string text;
  for (char ch : layout)
    if (ch != ',') text += ch;  // purely cosmetic in Megatron-core
  text = unroll(unroll(text, true, layout), false, layout);
  std::vector<std::string> stages(1);
  for (char ch : text) {
    if (ch == '|') {
      stages.emplace_back();
      continue;
    }
    if (ch == 'm')
      usage_error("{} '{}': multi-token prediction layers (m) are not implemented in ptdp", kLayoutFlag, layout);
    if (ch != 'E' && ch != 'L' && ch != 't')
      usage_error("{} '{}': '{}' is no layer (E embedding, t transformer layer, L loss, m MTP; '|' between virtual "
                  "stages, \"(...)*n\" and \"x*n\" repeat, commas are ignored)",
                  kLayoutFlag, layout, ch);
    stages.back() += ch;
  }
  const int n = int(stages.size());
  if (n % p != 0)
    usage_error("{} '{}' has {} virtual stages, not a multiple of --pp {}", kLayoutFlag, layout, n, p);
  const auto count = [&](char ch) { return std::count(text.begin(), text.end(), ch); };
  if (count('E') != 1 || count('L') != 1)
    usage_error("{} '{}' must hold the embedding (E) and the loss (L) once each (it has {} and {})", kLayoutFlag,
                layout, count('E'), count('L'));
  if (count('t') != layers)
    usage_error("{} '{}' holds {} transformer layers (t), --layers is {}", kLayoutFlag, layout, count('t'), layers);
  if (stages.front().empty() || stages.front()[0] != 'E')
    usage_error("{} '{}': the embedding (E) must open the first virtual stage (ptdp runs it on stage 0's first "
                "chunk)",
                kLayoutFlag, layout);
  if (stages.back().empty() || stages.back().back() != 'L')
    usage_error("{} '{}': the loss (L) must close the last virtual stage (ptdp runs it on the last stage's last "
                "chunk)",
                kLayoutFlag, layout);
  std::vector<int> chunks;
  for (int i = 0; i < n; ++i) {
    const int t = int(std::count(stages[i].begin(), stages[i].end(), 't'));
    if (t == 0 && i != 0 && i != n - 1)  // the first and last may hold only the embedding or the loss
      usage_error("{} '{}': virtual stage {} (stage {}, chunk {}) holds nothing (no transformer layer, embedding or "
                  "loss); ptdp needs something in each",
                  kLayoutFlag, layout, i, i % p, i / p);
    chunks.push_back(t);
  }
  return chunks;
}

std::string canonical_layout(const std::vector<int>& chunks) {
  std::string out;
  for (size_t i = 0; i < chunks.size(); ++i)
    out += fmt::format("{}{}{}{}", i ? "|" : "", i == 0 ? "E" : "", chunks[i], i + 1 == chunks.size() ? "L" : "");
  return out;
}

}  // namespace ptdp
