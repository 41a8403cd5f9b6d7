// Strict optimizer semantics with grouped-query attention (--num-query-groups): tensor
// parallelism splits the query heads and the query groups (whole groups per rank), and every
// layout — t, p, v, d, each schedule and recompute mode, sequence parallelism, --zero 1 and 3, the
// device plumbing — gives the same losses and final weights as one rank (relative error < 1e-5
// over the model). LLaMA: llama-tiny-gqa (4 heads, 2 groups) and one group (multi-query
// attention); GPT: 8 heads in 4 groups (biases, LayerNorm), so that t = 4 holds a group per rank.
// On the CUDA backend (the vgpu, or a GPU) against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

#include "core/testing/equivalence.h"
#include "core/testing/parallel_run.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

ModelConfig llama_gqa8(int groups) {
  ModelConfig c = preset_config("llama-tiny-gqa");
  c.layers = 8;
  c.query_groups = groups;
  return c;
}

ModelConfig gpt_gqa8() {  // tiny with 8 layers and 8 heads of size 8 sharing 4 key/value heads
  ModelConfig c = preset_config("tiny");
  c.layers = 8;
  c.heads = 8;
  c.query_groups = 4;
  return c;
}

struct Case {
  const char* name;
  ModelConfig (*model)();
};
ModelConfig llama_g2() { return llama_gqa8(2); }
ModelConfig llama_g1() { return llama_gqa8(1); }
const Case kCases[] = {{"LlamaGroups2", llama_g2}, {"LlamaGroups1", llama_g1}, {"GptGroups4", gpt_gqa8}};

ModelConfig case_model(int which, int layers) {
  ModelConfig c = kCases[which].model();
  c.layers = layers;
  return c;
}

// One rank's run of a case at a depth, trained once per process.
const RunResult& reference(int which, int layers = 8) {
  static std::map<std::pair<int, int>, RunResult> refs;
  auto [it, fresh] = refs.try_emplace({which, layers});
  if (fresh)
    it->second =
        testing::train_parallel(case_model(which, layers), testing::equivalence_train_config(1), Layout{}, 3, 33);
  return it->second;
}

struct GqaLayout {
  int model;  // index in kCases
  Layout layout;
};
void PrintTo(const GqaLayout& g, std::ostream* os) { *os << kCases[g.model].name << "_" << g.layout.name(); }

Layout layout(int t, int p, int d, ScheduleKind k, Recompute r) {
  Layout l;
  l.tp = t, l.pp = p, l.dp = d, l.vpp = k == ScheduleKind::Interleaved ? 2 : 1, l.schedule = k;
  l.recompute = r, l.bucket_elems = 20001;
  return l;
}

std::vector<GqaLayout> cpu_layouts() {
  std::vector<GqaLayout> out;
  auto add = [&](int m, Layout l) { out.push_back({m, l}); };
  using K = ScheduleKind;
  using R = Recompute;
  for (int m : {0, 2}) {  // t divides the groups: t in {1, 2} (llama, 2 groups), {1, 2, 4} (gpt, 4 groups)
    for (R r : {R::None, R::Full, R::Selective}) {
      add(m, layout(2, 1, 1, K::OneFOneB, r));
      add(m, layout(2, 2, 2, K::Interleaved, r));
    }
    add(m, layout(1, 2, 2, K::GPipe, R::None));
    add(m, layout(1, 4, 2, K::OneFOneB, R::Selective));
    add(m, layout(2, 4, 1, K::GPipe, R::Full));
    Layout nosg = layout(2, 2, 1, K::OneFOneB, R::None);
    nosg.scatter_gather = false;
    add(m, nosg);
    Layout sp = layout(2, 2, 1, K::OneFOneB, R::Selective);  // sequence parallelism
    sp.sequence_parallel = true;
    add(m, sp);
    Layout sp_il = layout(2, 2, 2, K::Interleaved, R::Full);
    sp_il.sequence_parallel = true;
    add(m, sp_il);
    Layout z1 = layout(2, 2, 2, K::OneFOneB, R::Full);  // the distributed optimizer
    z1.zero = 1, z1.overlap = true;
    add(m, z1);
    Layout z3 = layout(1, 1, 2, K::OneFOneB, R::Selective);  // ZeRO-3
    z3.zero = 3;
    add(m, z3);
    Layout hd = layout(2, 2, 2, K::Interleaved, R::Selective);  // device plumbing on the CPU
    hd.backend = "host-device";
    add(m, hd);
  }
  add(2, layout(4, 2, 1, K::OneFOneB, R::None));  // gpt: one group of two heads per rank
  Layout sp4 = layout(4, 1, 2, K::GPipe, R::Full);
  sp4.sequence_parallel = true;
  add(2, sp4);
  // Multi-query attention (one group: t = 1 only).
  add(1, layout(1, 2, 2, K::Interleaved, R::Selective));
  add(1, layout(1, 4, 1, K::OneFOneB, R::Full));
  Layout z3 = layout(1, 1, 4, K::OneFOneB, R::None);
  z3.zero = 3;
  add(1, z3);
  return out;
}

std::string name(const ::testing::TestParamInfo<GqaLayout>& info) {
  return std::string(kCases[info.param.model].name) + "_" + info.param.layout.name();
}

class Gqa : public ::testing::TestWithParam<GqaLayout> {};

TEST_P(Gqa, MatchesOneRankOnTheSameGlobalBatch) {
  const GqaLayout& g = GetParam();
  testing::expect_same_training(
      reference(g.model),
      testing::train_parallel(kCases[g.model].model(), testing::equivalence_train_config(1), g.layout, 3, 33));
}

INSTANTIATE_TEST_SUITE_P(Grid, Gqa, ::testing::ValuesIn(cpu_layouts()), name);

// Grouped-query attention changes the model: one rank with 2 groups does not train as with 4
// heads of their own (the check above could not tell a layout change that ignored the groups).
TEST(GqaModel, GroupsChangeTheModelAndItsParameters) {
  ModelConfig mha = llama_gqa8(0);
  const RunResult& gqa = reference(0);
  const RunResult full = testing::train_parallel(mha, testing::equivalence_train_config(1), Layout{}, 1, 33);
  EXPECT_EQ(gqa.weights.at("layers.0.qkv.weight").size(), size_t((4 + 2 * 2) * 16 * 64));
  EXPECT_EQ(full.weights.at("layers.0.qkv.weight").size(), size_t(3 * 64 * 64));
  EXPECT_NE(gqa.losses[0], full.losses[0]);
}

#ifdef PTDP_HAVE_CUDA
// The CUDA backend's gqa_expand / gqa_reduce in training, every rank a thread on GPU 0 (or over
// NCCL, one GPU per rank), against the CPU reference, with the bounds of the CudaPtdp grid.
// Every layout has p*v <= 4, so each case at 4 layers, half the kernel work of its 8.
class CudaGqa : public ::testing::TestWithParam<GqaLayout> {};
constexpr int kCudaLayers = 4;

TEST_P(CudaGqa, MatchesTheCpuReferenceOnOneGpu) {
  std::string reason;
  const int gpus = cuda::device_count(&reason);
  if (gpus == 0) GTEST_SKIP() << "no GPU here: " << reason;
  GqaLayout g = GetParam();
  Layout& l = g.layout;
  std::string no_room;
  if (l.comm == "nccl" && !testing::nccl_ranks_fit(l.tp * l.pp * l.dp, gpus, &no_room)) GTEST_SKIP() << no_room;
  l.backend = "cuda";
  ASSERT_LE(l.pp * l.vpp, kCudaLayers);
  const RunResult got =
      testing::train_parallel(case_model(g.model, kCudaLayers), testing::equivalence_train_config(1), l, 3, 33);
  const RunResult& ref = reference(g.model, kCudaLayers);
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_LT(std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i], 1e-4) << "iteration " << i + 1;
  EXPECT_LT(testing::compare_weights(ref, got).whole, 1e-3);
}

std::vector<GqaLayout> cuda_layouts() {
  using K = ScheduleKind;
  using R = Recompute;
  std::vector<GqaLayout> out;
  out.push_back({0, layout(2, 2, 1, K::OneFOneB, R::Selective)});
  out.back().layout.recompute_act = true;  // SwiGLU's output rebuilt in backward by its CUDA kernel
  out.push_back({0, layout(2, 2, 2, K::Interleaved, R::Full)});
  out.back().layout.sequence_parallel = true;
  out.push_back({2, layout(2, 2, 1, K::GPipe, R::None)});
  out.push_back({1, layout(1, 2, 2, K::OneFOneB, R::Selective)});
  out.back().layout.zero = 1;
#ifdef PTDP_HAVE_NCCL
  out.push_back({0, layout(2, 2, 1, K::OneFOneB, R::Full)});
  out.back().layout.comm = "nccl";
#endif
  return out;
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaGqa, ::testing::ValuesIn(cuda_layouts()), name);
#endif

}  // namespace
}  // namespace ptdp
