// Strict optimizer semantics for PTD-P: for p in {1,2,4}, v in {1,2}, t in {1,2}, d in {1,2}
// (t*p*d <= 8), every schedule, recompute none/full/selective and scatter/gather on and off
// (where t > 1 and p > 1 make it matter), three steps give the same loss at every iteration
// and the same final weights as one rank on the same global batch (relative error < 1e-5 over
// the model; per tensor < 1e-3, see parallel_equivalence_test.cpp for why).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/testing/equivalence.h"
#include "core/testing/pairwise.h"
#include "core/testing/parallel_run.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

ModelConfig model8() {  // tiny with 8 layers, so that p*v = 8 places one layer per chunk
  ModelConfig c = preset_config("tiny");
  c.layers = 8;
  return c;
}

TrainConfig train_cfg() { return testing::equivalence_train_config(1); }

const RunResult& model8_reference() {
  static const RunResult ref = testing::train_parallel(model8(), train_cfg(), Layout{}, 3, 33);
  return ref;
}

std::vector<Layout> grid() {
  std::vector<Layout> out;
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    for (int p : {1, 2, 4})
      for (int t : {1, 2})
        for (int d : {1, 2}) {
          if (t * p * d > 8) continue;
          const int v = k == ScheduleKind::Interleaved ? 2 : 1;
          if (v > 1 && p == 1) continue;  // interleaving needs a pipeline
          for (Recompute r : {Recompute::None, Recompute::Full, Recompute::Selective})
            for (bool sg : {true, false}) {
              if (!sg && (t == 1 || p == 1)) continue;  // nothing to scatter
              Layout l;
              l.tp = t, l.pp = p, l.dp = d, l.vpp = v, l.schedule = k, l.recompute = r, l.scatter_gather = sg;
              out.push_back(l);
            }
        }
  return out;
}

class Ptdp : public ::testing::TestWithParam<Layout> {};

TEST_P(Ptdp, MatchesOneRankOnTheSameGlobalBatch) {
  const Layout& l = GetParam();
  testing::expect_same_training(model8_reference(), testing::train_parallel(model8(), train_cfg(), l, 3, 33));
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Grid, Ptdp, ::testing::ValuesIn(grid()), layout_name);

// The device plumbing (token uploads, stage buffers from the backend, communicators staging
// device tensors through host memory, asynchronous all-reduce included) on a backend whose
// tensors are labelled as device memory but whose arithmetic is the CPU's: the same bounds
// hold. Every schedule, t, p, d, recompute mode and scatter/gather setting appears once.
// A layout with small gradient buckets (several all-reduces per chunk), v = 2 when interleaved.
Layout layout(int t, int p, int d, ScheduleKind k, Recompute r, bool sg, bool overlap) {
  Layout l;
  l.tp = t, l.pp = p, l.dp = d, l.vpp = k == ScheduleKind::Interleaved ? 2 : 1, l.schedule = k;
  l.recompute = r, l.scatter_gather = sg, l.overlap = overlap, l.bucket_elems = 20000;
  return l;
}

std::vector<Layout> host_device_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, bool sg, bool overlap) {
    out.push_back(layout(t, p, d, k, r, sg, overlap));
    out.back().backend = "host-device";
  };
  add(1, 1, 1, ScheduleKind::OneFOneB, Recompute::None, true, false);
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Full, true, true);
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::Selective, false, false);
  add(1, 4, 2, ScheduleKind::GPipe, Recompute::None, true, true);
  return out;
}

INSTANTIATE_TEST_SUITE_P(HostDevice, Ptdp, ::testing::ValuesIn(host_device_layouts()), layout_name);

// The distributed optimizer (--zero 1) under t, p, v, every schedule and recompute mode, d = 2
// and 4, one bucket or several (uneven chunks), with and without overlap: the same bounds.
std::vector<Layout> zero1_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, bool overlap, int64_t bucket) {
    out.push_back(layout(t, p, d, k, r, true, overlap));
    out.back().zero = 1;
    out.back().bucket_elems = bucket;
  };
  add(1, 1, 2, ScheduleKind::OneFOneB, Recompute::None, false, 40'000'000);
  add(1, 1, 4, ScheduleKind::OneFOneB, Recompute::None, true, 20001);
  add(2, 1, 2, ScheduleKind::GPipe, Recompute::Selective, false, 20001);
  add(1, 2, 2, ScheduleKind::OneFOneB, Recompute::Full, true, 20001);
  add(1, 2, 4, ScheduleKind::OneFOneB, Recompute::Selective, false, 7777);
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Full, true, 20001);
  add(1, 4, 2, ScheduleKind::Interleaved, Recompute::None, true, 40'000'000);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Zero1, Ptdp, ::testing::ValuesIn(zero1_layouts()), layout_name);

// ZeRO-3 (t = p = 1): d = 2 and 4, every recompute mode (full: the gathered layer serves the
// recomputation too), several micro-batches per rank (gradients reduce-scattered after each).
std::vector<Layout> zero3_layouts() {
  std::vector<Layout> out;
  for (int d : {2, 4})
    for (Recompute r : {Recompute::None, Recompute::Full, Recompute::Selective}) {
      out.push_back(layout(1, 1, d, d == 2 ? ScheduleKind::GPipe : ScheduleKind::OneFOneB, r, true, false));
      out.back().zero = 3;
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Zero3, Ptdp, ::testing::ValuesIn(zero3_layouts()), layout_name);

std::vector<Layout> zero_host_device_layouts() {
  std::vector<Layout> out = zero1_layouts();
  out.push_back(zero3_layouts()[1]);
  for (Layout& l : out) l.backend = "host-device";
  return {out[1], out[5], out.back()};
}

INSTANTIATE_TEST_SUITE_P(ZeroHostDevice, Ptdp, ::testing::ValuesIn(zero_host_device_layouts()), layout_name);

// Sequence parallelism: each tensor-parallel rank holds n/t rows between the tensor-parallel
// regions and sends exactly those to the next stage (no scatter/gather). t = 2 and 4, every
// schedule and recompute mode, d = 1 and 2, the distributed optimizer with overlapped buckets,
// and b = 2 (rows of two sequences split over t = 4).
std::vector<Layout> sequence_parallel_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, bool overlap = false, int zero = 0) {
    out.push_back(layout(t, p, d, k, r, true, overlap));
    out.back().sequence_parallel = true;
    out.back().zero = zero;
  };
  for (Recompute r : {Recompute::None, Recompute::Full, Recompute::Selective}) {
    add(2, 1, 1, ScheduleKind::OneFOneB, r);
    add(2, 2, 1, ScheduleKind::OneFOneB, r);
    add(2, 2, 2, ScheduleKind::Interleaved, r);
  }
  add(2, 1, 2, ScheduleKind::OneFOneB, Recompute::None);
  add(2, 4, 1, ScheduleKind::GPipe, Recompute::Selective);
  add(4, 2, 1, ScheduleKind::OneFOneB, Recompute::Full);
  add(2, 2, 2, ScheduleKind::OneFOneB, Recompute::None, true, 1);
  return out;
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, Ptdp, ::testing::ValuesIn(sequence_parallel_layouts()), layout_name);

// Uneven stages (Megatron-core's --decoder-first/last-pipeline-num-layers): the first and/or last
// stage holds a given number of layers, the others share the rest; with interleaving each stage's
// layers split evenly over its chunks. Also p = 3, which divides no layer count here evenly.
std::vector<Layout> uneven_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, int first, int last) {
    out.push_back(layout(t, p, d, k, r, true, false));
    out.back().first = first;
    out.back().last = last;
  };
  add(1, 2, 2, ScheduleKind::OneFOneB, Recompute::None, 3, 0);       // 3 | 5
  add(2, 2, 1, ScheduleKind::GPipe, Recompute::Full, 0, 2);           // 6 | 2
  add(1, 3, 2, ScheduleKind::OneFOneB, Recompute::Selective, 2, 2);   // 2 | 4 | 2
  add(1, 4, 2, ScheduleKind::OneFOneB, Recompute::None, 1, 1);        // 1 | 3 | 3 | 1
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, 2, 0);  // chunks 1 | 3, then 1 | 3
  return out;
}

INSTANTIATE_TEST_SUITE_P(Uneven, Ptdp, ::testing::ValuesIn(uneven_layouts()), layout_name);

// The embedding and/or the loss counted as a layer (Megatron-core's
// --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split).
std::vector<Layout> counted_edge_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, Recompute r, bool embedding, bool loss) {
    out.push_back(layout(t, p, d, ScheduleKind::OneFOneB, r, true, false));
    out.back().embedding = embedding;
    out.back().loss = loss;
  };
  add(1, 3, 2, Recompute::None, true, false);       // 9 "layers": 2 | 3 | 3
  add(2, 3, 1, Recompute::Selective, false, true);  // 3 | 3 | 2
  add(1, 5, 1, Recompute::Full, true, true);        // 10: 1 | 2 x 3 | 1
  return out;
}

INSTANTIATE_TEST_SUITE_P(CountedEdges, Ptdp, ::testing::ValuesIn(counted_edge_layouts()), layout_name);

// --pipeline-model-parallel-layout: any number of layers per virtual stage ("Et|ttt|ttt|tL" with
// p = 2: stage 0 holds chunks of 1 and 3 layers, stage 1 of 3 and 1; "Ettt|tt|tttL" over p = 3).
std::vector<Layout> pipeline_layouts() {
  std::vector<Layout> out;
  out.push_back(layout(1, 2, 1, ScheduleKind::Interleaved, Recompute::None, true, false));
  out.back().chunks = {1, 3, 3, 1};
  out.push_back(layout(2, 3, 1, ScheduleKind::OneFOneB, Recompute::Full, true, false));
  out.back().chunks = {3, 2, 3};
  return out;
}

INSTANTIATE_TEST_SUITE_P(PipelineLayout, Ptdp, ::testing::ValuesIn(pipeline_layouts()), layout_name);

// Megatron-core's standalone embedding and loss virtual stages: "E|t*4|t*4|L" over p = 2, v = 2
// (chunks of no transformer layer first on stage 0 and last on stage 1), t = 1 with full
// recomputation, and t = 2, d = 2 with the data-parallel reduction overlapped.
std::vector<Layout> standalone_edge_layouts() {
  std::vector<Layout> out;
  out.push_back(layout(1, 2, 1, ScheduleKind::Interleaved, Recompute::Full, true, false));
  out.back().chunks = {0, 4, 4, 0};
  out.push_back(layout(2, 2, 2, ScheduleKind::Interleaved, Recompute::None, true, true));
  out.back().chunks = {0, 4, 4, 0};
  return out;
}

INSTANTIATE_TEST_SUITE_P(StandaloneEdges, Ptdp, ::testing::ValuesIn(standalone_edge_layouts()), layout_name);

// Interleaved, only the first chunk of stage 0 and the last chunk of the last stage are short: 6
// layers + the embedding + the loss = 8 over p = 2, v = 2: stage 0 holds [0] [3, 4], stage 1 [1, 2] [5].
TEST(CountedEdges, InterleavedChunksOfUnequalSizeMatchOneRank) {
  ModelConfig six = model8();
  six.layers = 6;
  const RunResult ref = testing::train_parallel(six, train_cfg(), Layout{}, 3, 33);
  for (int t : {1, 2}) {
    Layout l = layout(t, 2, 1, ScheduleKind::Interleaved, Recompute::Selective, true, false);  // v = 2
    l.embedding = l.loss = true;
    testing::expect_same_training(ref, testing::train_parallel(six, train_cfg(), l, 3, 33));
  }
}

// Megatron-core's standalone embedding and loss virtual stages, chunks of no transformer layer:
// "E|tt|tt|L" over p = 2, v = 2 (stage 0 holds the embedding alone, then layers 2-3; stage 1
// layers 0-1, then the loss alone), and 6 layers with the embedding and the loss counted over
// p = 4, v = 2 (one "layer" per chunk: the first is the embedding, the last the loss).
TEST(PipelineLayout, StandaloneEmbeddingAndLossStagesMatchOneRank) {
  ModelConfig four = model8();
  four.layers = 4;
  const RunResult ref4 = testing::train_parallel(four, train_cfg(), Layout{}, 3, 33);
  for (int t : {1, 2}) {
    Layout l = layout(t, 2, 1, ScheduleKind::Interleaved, Recompute::Selective, true, t == 2);
    l.chunks = {0, 2, 2, 0};
    testing::expect_same_training(ref4, testing::train_parallel(four, train_cfg(), l, 3, 33));
  }
  ModelConfig six = model8();
  six.layers = 6;
  const RunResult ref6 = testing::train_parallel(six, train_cfg(), Layout{}, 3, 33);
  Layout l = layout(1, 4, 1, ScheduleKind::Interleaved, Recompute::None, true, false);
  l.embedding = l.loss = true;
  testing::expect_same_training(ref6, testing::train_parallel(six, train_cfg(), l, 3, 33));
}

// The CUDA grid's covering (pairwise_cover): every pair of settings some layout of the grid has is
// in one of its layouts, and it is a fraction of the grid.
TEST(PairwiseCover, EveryPairOfTheGridsSettingsIsInOneOfItsLayouts) {
  const std::vector<Layout> all = grid(), cover = testing::pairwise_cover(all);
  auto settings = [](const Layout& l) {
    return std::array<int, 6>{int(l.schedule), l.pp, l.tp, l.dp, int(l.recompute), l.scatter_gather ? 1 : 0};
  };
  int pairs = 0;
  for (const Layout& l : all) {
    const auto v = settings(l);
    for (int i = 0; i < 6; ++i)
      for (int j = i + 1; j < 6; ++j) {
        bool found = false;
        for (const Layout& c : cover) {
          const auto w = settings(c);
          found = found || (w[i] == v[i] && w[j] == v[j]);
        }
        EXPECT_TRUE(found) << l.name() << ": settings " << i << " and " << j;
        ++pairs;
      }
  }
  EXPECT_GT(pairs, 0);
  EXPECT_LT(cover.size(), all.size() / 4) << cover.size() << " of " << all.size();
  for (const Layout& c : cover) EXPECT_NE(std::find_if(all.begin(), all.end(), [&](const Layout& l) {
                                            return l.name() == c.name();
                                          }), all.end());
}

// b = 2: the n/t rows of a rank span parts of two sequences (t = 4) or one whole sequence each (t = 2).
TEST(SequenceParallel, TwoSequencesPerMicroBatchMatchOneRank) {
  for (int t : {2, 4}) {
    Layout l = layout(t, 2, 1, ScheduleKind::OneFOneB, Recompute::None, true, false);
    l.sequence_parallel = true;
    testing::expect_same_training(model8_reference(),
                                  testing::train_parallel(model8(), testing::equivalence_train_config(2), l, 3, 33));
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallelHostDevice, Ptdp, ::testing::Values([] {
                           Layout l = layout(2, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, true, true);
                           l.sequence_parallel = true;
                           l.backend = "host-device";
                           return l;
                         }()),
                         layout_name);

// --recompute-activation: the GeLU's output dropped after forward and rebuilt from fc in backward,
// alone, under tensor and pipeline parallelism, with selective recomputation and with sequence
// parallelism, and on the host-device backend.
std::vector<Layout> recompute_activation_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, bool sp) {
    out.push_back(layout(t, p, d, k, r, true, false));
    out.back().recompute_act = true;
    out.back().sequence_parallel = sp;
  };
  add(1, 1, 1, ScheduleKind::OneFOneB, Recompute::None, false);
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::None, false);
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, true);
  add(1, 4, 2, ScheduleKind::GPipe, Recompute::Selective, false);
  out.push_back(out[1]);
  out.back().backend = "host-device";
  return out;
}

INSTANTIATE_TEST_SUITE_P(RecomputeActivation, Ptdp, ::testing::ValuesIn(recompute_activation_layouts()), layout_name);

#ifdef PTDP_HAVE_CUDA
// Every rank a thread on GPU 0 (the CUDA backend, f32, communicators staging through host
// memory) or NCCL with a GPU per rank, against the CPU reference. cuBLAS sums in another order
// than OpenBLAS, so the bounds are those of two correct f32 computations rather than of the same one.
// These check the device plumbing of every schedule, layout, recompute mode and scatter/gather
// setting (streams, stage buffers, p2p and the collectives of device tensors), which does not
// depend on the width or the depth: model8 at half its width and sequence (h = 32, 4 heads of 8,
// s = 16) and with as few layers as the layout allows while every chunk holds whole layers and the
// layouts with p*v <= 2 hold several per stage: 4 layers, or 8 where p*v = 8. That is an eighth of
// model8's kernel work on the virtual GPU for most layouts. The kernels at other shapes are the
// CudaKernels tests'; model8 itself trains on the CUDA backend in CliCuda (t = p = d = v = 2) and
// tiny in MixedPrecision.CudaBf16AndF16FollowTheCpuBackend.
ModelConfig narrow(int layers) {
  ModelConfig c = model8();
  c.hidden = 32;
  c.seq_length = 16;
  c.layers = layers;
  return c;
}

int narrow_layers(const Layout& l) {
  return l.pp * l.vpp > 4 || l.first || l.last || l.embedding || l.loss || !l.chunks.empty() ? 8 : 4;
}

const RunResult& narrow_reference(int layers) {  // each depth trained once, when first needed
  if (layers == 4) {
    static const RunResult ref4 = testing::train_parallel(narrow(4), train_cfg(), Layout{}, 3, 33);
    return ref4;
  }
  static const RunResult ref8 = testing::train_parallel(narrow(8), train_cfg(), Layout{}, 3, 33);
  return ref8;
}

class CudaPtdp : public ::testing::TestWithParam<Layout> {};

// On the virtual GPU every load and store of the kernels is checked (bounds, initialisation,
// races between a kernel's threads) in every layout, at up to twice the time (the grid's 114
// layouts: 82 s → 117 s on the 2-core VM, two at a time).
TEST_P(CudaPtdp, MatchesTheCpuReferenceOnOneGpu) {
  std::string reason;
  const int gpus = cuda::device_count(&reason);
  if (gpus == 0) GTEST_SKIP() << "no GPU here: " << reason;
  Layout l = GetParam();
  std::string no_room;
  if (l.comm == "nccl" && !testing::nccl_ranks_fit(l.tp * l.pp * l.dp, gpus, &no_room)) GTEST_SKIP() << no_room;
  l.backend = "cuda";
  const int layers = narrow_layers(l);
  RunResult got = testing::train_parallel(narrow(layers), train_cfg(), l, 3, 33);
  const RunResult& ref = narrow_reference(layers);
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_LT(std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i], 1e-4) << "iteration " << i + 1;
  EXPECT_LT(std::abs(got.eval_loss - ref.eval_loss) / ref.eval_loss, 1e-4) << "evaluation";
  EXPECT_LT(testing::compare_weights(ref, got).whole, 1e-3);
}

// On a GPU every layout of the grid. On the virtual GPU, whose kernels run on the CPU (114 layouts:
// 160 s of the suite's time), the layouts that cover every pair of the grid's settings
// (testing/pairwise.h): the device plumbing of each schedule with each p, t, d, recompute mode and
// scatter/gather setting, and so on for every two of them, in 11 layouts; the CPU grid above runs
// every combination.
#ifdef PTDP_VGPU
INSTANTIATE_TEST_SUITE_P(Grid, CudaPtdp, ::testing::ValuesIn(testing::pairwise_cover(grid())), layout_name);
#else
INSTANTIATE_TEST_SUITE_P(Grid, CudaPtdp, ::testing::ValuesIn(grid()), layout_name);
#endif

// Sequence parallelism on the CUDA backend (device all-gathers and reduce-scatters staged
// through the host communicator): t = 2 with a pipeline, 1F1B and interleaved.
std::vector<Layout> cuda_sequence_parallel_layouts() {
  const std::vector<Layout> all = sequence_parallel_layouts();
  return {all[1], all[8]};  // t2 p2 d1 1f1b none, t2 p2 d2 interleaved selective
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, CudaPtdp, ::testing::ValuesIn(cuda_sequence_parallel_layouts()),
                         layout_name);

// Uneven stages on the CUDA backend: p = 3 (2 | 4 | 2) and the interleaved one.
INSTANTIATE_TEST_SUITE_P(Uneven, CudaPtdp, ::testing::Values(uneven_layouts()[2], uneven_layouts()[4]), layout_name);
INSTANTIATE_TEST_SUITE_P(CountedEdges, CudaPtdp, ::testing::Values(counted_edge_layouts()[2]), layout_name);
INSTANTIATE_TEST_SUITE_P(PipelineLayout, CudaPtdp, ::testing::Values(pipeline_layouts()[0]), layout_name);
INSTANTIATE_TEST_SUITE_P(StandaloneEdges, CudaPtdp, ::testing::Values(standalone_edge_layouts()[0]), layout_name);
// The activation recomputed by the GeLU kernel, against the forward's cuBLASLt GELU_AUX epilogue.
INSTANTIATE_TEST_SUITE_P(RecomputeActivation, CudaPtdp, ::testing::Values(recompute_activation_layouts()[1]),
                         layout_name);

#ifdef PTDP_HAVE_NCCL
// The same over NCCL, one GPU per rank: every schedule, t, p, d, recompute mode, scatter/gather
// setting and the overlapped data-parallel all-reduce appear at least once.
std::vector<Layout> nccl_layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, bool sg, bool overlap) {
    out.push_back(layout(t, p, d, k, r, sg, overlap));
    out.back().comm = "nccl";
  };
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Full, true, true);
  add(1, 2, 1, ScheduleKind::OneFOneB, Recompute::None, true, false);
  add(1, 4, 2, ScheduleKind::OneFOneB, Recompute::Selective, true, true);
  add(2, 1, 2, ScheduleKind::GPipe, Recompute::None, true, true);
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::Selective, false, false);
  add(1, 4, 1, ScheduleKind::Interleaved, Recompute::None, true, false);
  add(2, 4, 1, ScheduleKind::GPipe, Recompute::Full, true, false);
  add(1, 2, 4, ScheduleKind::OneFOneB, Recompute::None, true, true);
  // Sequence parallelism over ncclAllGather / ncclReduceScatter, and its LayerNorm all-reduce.
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::Selective, true, false);
  out.back().sequence_parallel = true;
  add(2, 1, 2, ScheduleKind::GPipe, Recompute::Full, true, true);
  out.back().sequence_parallel = true;
  for (Layout l : zero1_layouts())  // the distributed optimizer over NCCL's reduce-scatter and all-gather
    if (l.tp * l.pp * l.dp <= 4 || l.schedule == ScheduleKind::Interleaved) {
      l.comm = "nccl";
      out.push_back(l);
    }
  for (Layout l : zero3_layouts())  // ZeRO-3's gathers and reduce-scatters over NCCL
    if (l.recompute != Recompute::None) {
      l.comm = "nccl";
      out.push_back(l);
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Nccl, CudaPtdp, ::testing::ValuesIn(nccl_layouts()), layout_name);
#endif
#endif

}  // namespace
}  // namespace ptdp
