// The layer placement equals Megatron-core's for the same flags: its two functions
// (transformer_block.py get_num_layers_to_build and transformer_layer.py
// get_transformer_layer_offset, as of core_r0.12) restated below step by step, compared with
// layer_split.h over every valid split of up to 24 layers, 6 stages and 3 chunks.
#include "core/model/layer_split.h"

#include "core/common/error.h"

#include <gtest/gtest.h>

#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ptdp {
namespace {

struct MegatronArgs {
  int num_layers, pp, vp;            // vp: 1 means virtual_pipeline_model_parallel_size None
  std::optional<int> first, last;    // num_layers_in_{first,last}_pipeline_stage
  bool embedding = false, loss = false;  // account_for_{embedding,loss}_in_pipeline_split
};

int megatron_num_layers_to_build(const MegatronArgs& a, int pp_rank, int vp_stage) {
  int per_rank;
  if (a.first || a.last) {
    int to_distribute = a.num_layers, stages_left = a.pp;
    if (a.first) to_distribute -= *a.first, stages_left -= 1;
    if (a.last) to_distribute -= *a.last, stages_left -= 1;
    per_rank = stages_left > 0 ? to_distribute / stages_left : 0;
    if (pp_rank == 0 && a.first) per_rank = *a.first;
    if (pp_rank == a.pp - 1 && a.last) per_rank = *a.last;
  } else {
    per_rank = (a.num_layers + a.embedding + a.loss) / a.pp;
  }
  int build = a.vp > 1 ? per_rank / a.vp : per_rank;
  return build - (a.embedding && pp_rank == 0 && vp_stage == 0) - (a.loss && pp_rank == a.pp - 1 && vp_stage == a.vp - 1);
}

int megatron_layer_offset(const MegatronArgs& a, int pp_rank, int vp_stage) {
  if (a.pp == 1) return 0;
  if (a.first || a.last) {
    const int middle_stages = a.pp - (a.first ? 1 : 0) - (a.last ? 1 : 0);
    const int first = a.first.value_or(0), last = a.last.value_or(0);
    const int middle_layers = a.num_layers - first - last;
    const int middle_rank = a.first ? pp_rank - 1 : pp_rank;
    if (a.vp > 1) {
      const int first_chunk = first / a.vp, last_chunk = last / a.vp, middle_chunk = middle_layers / a.vp;
      const int total = first_chunk + middle_chunk + last_chunk;
      if (pp_rank == 0) return vp_stage * total;
      return vp_stage * total + first_chunk + middle_rank * (middle_chunk / middle_stages);
    }
    const int per_rank = middle_stages > 0 ? middle_layers / middle_stages : 0;
    return pp_rank == 0 ? 0 : middle_rank * per_rank + first;
  }
  const int num_layers = a.num_layers + a.embedding + a.loss, per_rank = num_layers / a.pp;
  const int before_embedding = a.embedding && !(vp_stage == 0 && pp_rank == 0);  // the embedding is no layer
  if (a.vp > 1) return vp_stage * (num_layers / a.vp) + pp_rank * (per_rank / a.vp) - before_embedding;
  return pp_rank * per_rank - before_embedding;
}

TEST(LayerSplit, PlacementEqualsMegatronCoresForEveryValidSplit) {
  int checked = 0, uneven = 0, counted = 0;
  for (int layers = 1; layers <= 24; ++layers)
    for (int p = 1; p <= 6; ++p)
      for (int v = 1; v <= 3; ++v) {
        if (p == 1 && v > 1) continue;  // interleaving needs a pipeline (Megatron and ptdp refuse it)
        for (int edges = 0; edges < 4; ++edges)  // the embedding and/or the loss counted as a layer
        for (int first = 0; first <= layers; ++first)
          for (int last = 0; last <= layers; ++last) {
            const bool embedding = edges & 1, loss = edges & 2;
            const LayerSplit s{layers, p, v, first, last, embedding, loss};
            if (!layer_split_error(s).empty()) continue;
            // Megatron-core divides by the number of middle stages there: p = 2 with both ends
            // given and interleaving raises ZeroDivisionError in get_transformer_layer_offset.
            if (p == 2 && first && last && v > 1) continue;
            const MegatronArgs a{layers, p, v, first ? std::optional<int>(first) : std::nullopt,
                                 last ? std::optional<int>(last) : std::nullopt, embedding, loss};
            std::vector<int> owner(layers, 0);
            for (int r = 0; r < p; ++r)
              for (int j = 0; j < v; ++j) {
                const LayerRange got = chunk_layers(s, r, j);
                const std::string at = fmt::format("{} layers, p {} v {} first {} last {} edges {}: stage {} chunk {}",
                                                   layers, p, v, first, last, edges, r, j);
                ASSERT_EQ(got.begin, megatron_layer_offset(a, r, j)) << at;
                ASSERT_EQ(got.size(), megatron_num_layers_to_build(a, r, j)) << at;
                ASSERT_EQ(stage_layer_count(s, r) >= got.size(), true) << at;
                // Only a counted embedding's (loss's) own chunk may be left with no transformer layer.
                const bool edge = (embedding && r == 0 && j == 0) || (loss && r == p - 1 && j == v - 1);
                ASSERT_GE(got.size(), edge ? 0 : 1) << at;
                for (int l = got.begin; l < got.end; ++l) ++owner[l];
              }
            for (int l = 0; l < layers; ++l) ASSERT_EQ(owner[l], 1) << "layer " << l << " of " << layers;
            int sum = 0;
            for (int j = 0; j < v; ++j) sum += chunk_layers(s, p - 1, j).size();
            ASSERT_EQ(sum, stage_layer_count(s, p - 1));
            ++checked;
            uneven += s.uneven();
            counted += embedding || loss;
          }
      }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(uneven, 500);
  EXPECT_GT(counted, 200);
}

TEST(LayerSplit, EvenChunksCoverEveryLayerExactlyOnce) {
  for (int layers : {8, 24, 96})
    for (int p : {1, 2, 4})
      for (int v : {1, 2, 3}) {
        if (layers % (p * v) != 0) continue;
        std::vector<int> owner(layers, 0);
        for (int s = 0; s < p; ++s)
          for (int j = 0; j < v; ++j) {
            const LayerRange r = chunk_layers(LayerSplit{layers, p, v}, s, j);
            EXPECT_EQ(r.end - r.begin, layers / (p * v));
            for (int l = r.begin; l < r.end; ++l) ++owner[l];
          }
        for (int l = 0; l < layers; ++l) EXPECT_EQ(owner[l], 1) << "layer " << l << " p=" << p << " v=" << v;
      }
  // Megatron's example: 8 layers, 2 stages, 2 chunks: stage 0 holds [0,1] [4,5], stage 1 [2,3] [6,7].
  EXPECT_EQ(chunk_layers(LayerSplit{8, 2, 2}, 0, 1).begin, 4);
  EXPECT_EQ(chunk_layers(LayerSplit{8, 2, 2}, 1, 0).begin, 2);
  EXPECT_EQ(chunk_layers(LayerSplit{8, 2, 2}, 1, 1).begin, 6);
}

// A published layout that an even split cannot express: 70 layers over 12 stages.
TEST(LayerSplit, SeventyLayersOverTwelveStages) {
  const LayerSplit s{70, 12, 1, 5, 5};
  ASSERT_EQ(layer_split_error(s), "");
  EXPECT_EQ(stage_layer_count(s, 0), 5);
  EXPECT_EQ(stage_layer_count(s, 1), 6);
  EXPECT_EQ(stage_layer_count(s, 11), 5);
  EXPECT_EQ(chunk_layers(s, 1, 0).begin, 5);
  EXPECT_EQ(chunk_layers(s, 11, 0).begin, 65);
  EXPECT_NE(layer_split_error(LayerSplit{70, 12, 1}), "");
  EXPECT_EQ(describe_stages(s), "5 | 6 x 10 | 5");
  EXPECT_EQ(describe_stages(LayerSplit{8, 2, 1, 3, 0}), "3 | 5");
  EXPECT_EQ(describe_stages(LayerSplit{8, 3, 1, 0, 2}), "3 x 2 | 2");
  EXPECT_EQ(describe_stages(LayerSplit{8, 2, 1}), "");
}

// Counted as layers: 94 layers + the embedding + the loss = 96 over 12 stages: 7 | 8 x 10 | 7,
// and under interleaving only the first chunk of stage 0 and the last of stage 11 are short.
TEST(LayerSplit, TheEmbeddingAndTheLossCountedAsLayers) {
  const LayerSplit s{94, 12, 1, 0, 0, true, true};
  ASSERT_EQ(layer_split_error(s), "");
  EXPECT_EQ(describe_stages(s), "7 | 8 x 10 | 7");
  EXPECT_EQ(chunk_layers(s, 1, 0).begin, 7);
  const LayerSplit v2{14, 2, 2, 0, 0, true, true};  // 16 "layers", 4 a chunk
  ASSERT_EQ(layer_split_error(v2), "");
  EXPECT_EQ(chunk_layers(v2, 0, 0).begin, 0);
  EXPECT_EQ(chunk_layers(v2, 0, 0).size(), 3);
  EXPECT_EQ(chunk_layers(v2, 1, 0).begin, 3);
  EXPECT_EQ(chunk_layers(v2, 0, 1).begin, 7);
  EXPECT_EQ(chunk_layers(v2, 1, 1).begin, 11);
  EXPECT_EQ(chunk_layers(v2, 1, 1).size(), 3);
  EXPECT_EQ(describe_stages(v2), "7 x 2");
  EXPECT_EQ(describe_stages(LayerSplit{7, 2, 1, 0, 0, true, false}), "3 | 4");
  auto err = [](LayerSplit x) { return layer_split_error(x); };
  EXPECT_NE(err({14, 2, 1, 7, 0, true, false}).find("cannot be combined with --decoder-first"), std::string::npos);
  EXPECT_NE(err({14, 4, 1, 0, 0, true, false}).find("--pp 4 must divide --layers 14 + 1 (the embedding counted"),
            std::string::npos)
      << err({14, 4, 1, 0, 0, true, false});
  EXPECT_NE(err({14, 2, 2, 0, 0, false, true}).find("--pp 2 x --vpp 2 must divide --layers 14 + 1"), std::string::npos);
  // One counted layer per chunk: the first chunk is the embedding alone, the last the loss alone
  // (Megatron-core's standalone embedding and loss stages).
  const LayerSplit edges{6, 8, 1, 0, 0, true, true};
  EXPECT_EQ(err(edges), "");
  EXPECT_EQ(chunk_layers(edges, 0, 0), (LayerRange{0, 0}));
  EXPECT_EQ(chunk_layers(edges, 1, 0), (LayerRange{0, 1}));
  EXPECT_EQ(chunk_layers(edges, 6, 0), (LayerRange{5, 6}));
  EXPECT_EQ(chunk_layers(edges, 7, 0), (LayerRange{6, 6}));
}

// --pipeline-model-parallel-layout: parsed as Megatron-core parses it, placed as its
// get_layer_offset / get_num_layers_to_build place it (restated: the virtual stages before this
// one, in order vpp rank 0's pp ranks, then vpp rank 1's, ...).
TEST(LayerSplit, PipelineLayoutsPlaceAsMegatronCore) {
  // The layouts that say what the other flags say place the same way.
  const LayerSplit counted{6, 2, 2, 0, 0, true, true};
  const LayerSplit layout{6, 2, 2, 0, 0, false, false, parse_pipeline_layout("Et|(tt|)*2,tL", 2, 6)};
  EXPECT_EQ(layout.chunks, (std::vector<int>{1, 2, 2, 1}));
  const LayerSplit explicit_ends{94, 12, 1, 7, 7};
  const LayerSplit long_layout{94, 12, 1, 0, 0, false, false, parse_pipeline_layout("Et*7|(t*8|)*10,t*7L", 12, 94)};
  for (const auto& [a, b] : {std::pair{&counted, &layout}, std::pair{&explicit_ends, &long_layout}}) {
    ASSERT_EQ(layer_split_error(*b), "");
    for (int r = 0; r < a->p; ++r)
      for (int j = 0; j < a->v; ++j) {
        EXPECT_EQ(chunk_layers(*a, r, j).begin, chunk_layers(*b, r, j).begin) << r << " " << j;
        EXPECT_EQ(chunk_layers(*a, r, j).size(), chunk_layers(*b, r, j).size()) << r << " " << j;
      }
    EXPECT_EQ(describe_stages(*a), describe_stages(*b));
  }
  EXPECT_EQ(canonical_layout(layout.chunks), "E1|2|2|1L");
  // Every layout of up to 4 stages x 3 chunks with 1-3 layers a virtual stage, written out.
  int checked = 0;
  for (int p = 1; p <= 4; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int seed = 0; seed < 5; ++seed) {
        std::vector<int> sizes;
        std::string text = "E";
        for (int i = 0; i < p * v; ++i) {
          sizes.push_back(1 + (i * 7 + seed * 3) % 3);
          text += (i ? "|" : "") + std::string(size_t(sizes.back()), 't');
        }
        text += "L";
        int layers = 0;
        for (int n : sizes) layers += n;
        const LayerSplit s{layers, p, v, 0, 0, false, false, parse_pipeline_layout(text, p, layers)};
        ASSERT_EQ(s.chunks, sizes) << text;
        ASSERT_EQ(layer_split_error(s), "") << text;
        for (int r = 0; r < p; ++r)
          for (int j = 0; j < v; ++j) {
            int offset = 0;  // Megatron-core: every pp rank of the vpp ranks before, then the pp ranks before
            for (int vr = 0; vr <= j; ++vr)
              for (int pr = 0; pr < (vr < j ? p : r); ++pr) offset += sizes[size_t(vr) * p + pr];
            ASSERT_EQ(chunk_layers(s, r, j).begin, offset) << text << " " << r << " " << j;
            ASSERT_EQ(chunk_layers(s, r, j).size(), sizes[size_t(j) * p + r]) << text;
          }
        ++checked;
      }
  EXPECT_EQ(checked, 60);
}

TEST(LayerSplit, LayoutsMegatronOrPtdpCannotRunAreRefusedNamingTheFlag) {
  auto refused = [](const std::string& layout, int p, int layers) -> std::string {
    try {
      parse_pipeline_layout(layout, p, layers);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::vector<std::tuple<std::string, int, int, std::string>> cases = {
      {"Ettt|(tt|)*29,m|L", 32, 61, "multi-token prediction layers (m) are not implemented"},
      {"Ett|||ttL", 2, 4, "virtual stage 1 (stage 1, chunk 0) holds nothing"},
      {"Ett|tt|ttL", 2, 6, "has 3 virtual stages, not a multiple of --pp 2"},
      {"tEt|ttL", 2, 4, "the embedding (E) must open the first virtual stage"},
      {"Ett|tLt", 2, 4, "the loss (L) must close the last virtual stage"},
      {"Ett|ttL", 2, 5, "holds 4 transformer layers (t), --layers is 5"},
      {"EEt|tL", 2, 2, "the embedding (E) and the loss (L) once each (it has 2 and 1)"},
      {"Ett|txL", 2, 3, "'x' is no layer"},
      {"Et*99999999999|tL", 2, 2, "a repeat count beyond"},
      {"E(t|)*3000000,tL", 2, 2, "unrolls to more than"},
  };
  for (const auto& [layout, p, layers, needle] : cases) {
    const std::string got = refused(layout, p, layers);
    EXPECT_NE(got.find(needle), std::string::npos) << layout << ": " << got;
    EXPECT_NE(got.find("--pipeline-model-parallel-layout"), std::string::npos) << got;
  }
  EXPECT_NE(layer_split_error({6, 2, 2, 1, 0, false, false, {1, 2, 2, 1}}).find("cannot be combined"), std::string::npos);
}

TEST(LayerSplit, LayoutsMayHoldTheEmbeddingOrTheLossAloneInAVirtualStage) {
  const std::vector<int> chunks = parse_pipeline_layout("E|t*2|t*2|L", 2, 4);
  EXPECT_EQ(chunks, (std::vector<int>{0, 2, 2, 0}));
  const LayerSplit s{4, 2, 2, 0, 0, false, false, chunks};
  ASSERT_EQ(layer_split_error(s), "");
  EXPECT_EQ(chunk_layers(s, 0, 0), (LayerRange{0, 0}));  // the embedding alone
  EXPECT_EQ(chunk_layers(s, 1, 0), (LayerRange{0, 2}));
  EXPECT_EQ(chunk_layers(s, 0, 1), (LayerRange{2, 4}));
  EXPECT_EQ(chunk_layers(s, 1, 1), (LayerRange{4, 4}));  // the loss alone
  EXPECT_EQ(canonical_layout(chunks), "E0|2|2|0L");
  EXPECT_NE(layer_split_error({4, 2, 2, 0, 0, false, false, {2, 0, 2, 0}}).find("every virtual stage but the first"),
            std::string::npos);
}

TEST(LayerSplit, InvalidSplitsNameTheFlags) {
  auto err = [](LayerSplit s) { return layer_split_error(s); };
  EXPECT_NE(err({8, 1, 1, 3, 0}).find("need --pp >= 2"), std::string::npos) << err({8, 1, 1, 3, 0});
  EXPECT_NE(err({8, 2, 1, 3, 3}).find("must equal --layers 8"), std::string::npos) << err({8, 2, 1, 3, 3});
  EXPECT_NE(err({8, 3, 1, 5, 5}).find("must not exceed --layers 8"), std::string::npos) << err({8, 3, 1, 5, 5});
  EXPECT_NE(err({8, 4, 1, 1, 0}).find("divide evenly over the other 3 stage(s)"), std::string::npos) << err({8, 4, 1, 1, 0});
  EXPECT_NE(err({8, 3, 1, 4, 4}).find("at least one each"), std::string::npos) << err({8, 3, 1, 4, 4});
  EXPECT_NE(err({8, 2, 2, 3, 0}).find("--vpp 2 must divide stage 0's 3 layers"), std::string::npos) << err({8, 2, 2, 3, 0});
  EXPECT_NE(err({8, 2, 1, -1, 0}).find("must not be negative"), std::string::npos);
  EXPECT_NE(err({9, 2, 1}).find("--pp 2 must divide --layers 9"), std::string::npos);
  EXPECT_NE(err({8, 2, 3}).find("--pp 2 x --vpp 3 must divide --layers 8"), std::string::npos);
}

}  // namespace
}  // namespace ptdp
