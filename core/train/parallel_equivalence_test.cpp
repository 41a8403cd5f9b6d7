// Strict optimizer semantics for tensor and data parallelism: three steps under every (t, d)
// with t*d <= 8 give the same loss at every iteration and the same final weights as one rank
// on the same global batch (relative error < 1e-5 over the whole model).
//
// Per tensor the bound is looser (1e-3): the key part of the QKV bias has a gradient that is
// zero in exact arithmetic (softmax ignores a constant added to every score of a row), so what
// Adam applies to it is rounding noise normalised by eps; that noise differs with the order of
// the sums, and it dominates that one small tensor (measured: up to 1.7e-4).
#include <gtest/gtest.h>

#include <cmath>

#include "core/testing/equivalence.h"
#include "core/testing/parallel_run.h"

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

TrainConfig tiny_equivalence_train() { return testing::equivalence_train_config(2); }

const RunResult& tiny_reference() {
  static const RunResult ref = testing::train_parallel(preset_config("tiny"), tiny_equivalence_train(), Layout{}, 3, 21);
  return ref;
}

void expect_same_as_one_rank(const RunResult& got, const std::string& what) {
  testing::expect_same_training(tiny_reference(), got, what);
}

class TensorDataParallel : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TensorDataParallel, MatchesOneRankOnTheSameGlobalBatch) {
  const auto [t, d] = GetParam();
  Layout layout;
  layout.tp = t;
  layout.dp = d;
  expect_same_as_one_rank(testing::train_parallel(preset_config("tiny"), tiny_equivalence_train(), layout, 3, 21),
                          "t=" + std::to_string(t) + " d=" + std::to_string(d));
}

// Every (t, d) in {1, 2, 4} x {1, 2, 4} with t * d <= 8.
INSTANTIATE_TEST_SUITE_P(Grid, TensorDataParallel,
                         ::testing::Values(std::tuple{1, 1}, std::tuple{1, 2}, std::tuple{1, 4}, std::tuple{2, 1},
                                           std::tuple{2, 2}, std::tuple{2, 4}, std::tuple{4, 1}, std::tuple{4, 2}),
                         [](const auto& info) {
                           return "t" + std::to_string(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Sequence parallelism (b = 2, s = 32: each of t ranks holds 64/t rows between the tensor-
// parallel regions): t = 2 and 4, d = 1 and 2, and d = 2 with overlapped small buckets.
class SequenceParallel : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(SequenceParallel, MatchesOneRankOnTheSameGlobalBatch) {
  const auto [t, d, overlap] = GetParam();
  Layout layout;
  layout.tp = t;
  layout.dp = d;
  layout.sequence_parallel = true;
  layout.overlap = overlap;
  if (overlap) layout.bucket_elems = 5000;
  expect_same_as_one_rank(testing::train_parallel(preset_config("tiny"), tiny_equivalence_train(), layout, 3, 21), layout.name());
}

INSTANTIATE_TEST_SUITE_P(Grid, SequenceParallel,
                         ::testing::Values(std::tuple{2, 1, false}, std::tuple{2, 2, false}, std::tuple{4, 1, false},
                                           std::tuple{4, 2, false}, std::tuple{2, 2, true}),
                         [](const auto& info) {
                           return "t" + std::to_string(std::get<0>(info.param)) + "_d" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_overlap" : "");
                         });

TEST(DataParallel, OverlappedBucketsGiveTheSameResult) {
  Layout layout;
  layout.tp = 2;
  layout.dp = 2;
  layout.overlap = true;
  layout.bucket_elems = 5000;  // many buckets, launched while backward runs
  expect_same_as_one_rank(testing::train_parallel(preset_config("tiny"), tiny_equivalence_train(), layout, 3, 21),
                          "overlap");
}

TEST(TensorParallel, PaddedVocabularyNeverChangesTheLoss) {
  // V = 250 pads to 256 with t = 1 and to 512 with t = 4 (a multiple of 128 * t): same losses.
  ModelConfig c = preset_config("tiny");
  c.vocab_size = 250;
  RunResult one = testing::train_parallel(c, tiny_equivalence_train(), Layout{}, 2, 5);
  Layout four;
  four.tp = 4;
  RunResult split = testing::train_parallel(c, tiny_equivalence_train(), four, 2, 5);
  for (size_t i = 0; i < one.losses.size(); ++i) EXPECT_NEAR(split.losses[i], one.losses[i], 1e-5 * one.losses[i]);
}

}  // namespace
}  // namespace ptdp
