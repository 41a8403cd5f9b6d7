// Strict optimizer semantics for --arch llama: t, p, v, d layouts (and --zero 1 and 3, and
// sequence parallelism) give the
// same losses and final weights as one rank (relative error < 1e-5 over the model).
#include <gtest/gtest.h>

#include "core/testing/equivalence.h"
#include "core/testing/parallel_run.h"

namespace ptdp {
namespace {

using testing::Layout;
using testing::RunResult;

ModelConfig llama8() {
  ModelConfig c = preset_config("llama-tiny");
  c.layers = 8;
  return c;
}

const RunResult& reference() {
  static const RunResult ref =
      testing::train_parallel(llama8(), testing::equivalence_train_config(1), Layout{}, 3, 33);
  return ref;
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  auto add = [&](int t, int p, int d, ScheduleKind k, Recompute r, int zero, bool sp = false) {
    Layout l;
    l.tp = t, l.pp = p, l.dp = d, l.vpp = k == ScheduleKind::Interleaved ? 2 : 1, l.schedule = k;
    l.recompute = r, l.zero = zero, l.bucket_elems = 20001, l.sequence_parallel = sp;
    out.push_back(l);
  };
  add(2, 1, 1, ScheduleKind::OneFOneB, Recompute::None, 0);
  add(1, 2, 1, ScheduleKind::OneFOneB, Recompute::Full, 0);
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, 0);
  add(1, 4, 2, ScheduleKind::GPipe, Recompute::None, 0);
  add(1, 1, 4, ScheduleKind::OneFOneB, Recompute::Full, 0);
  add(2, 2, 2, ScheduleKind::OneFOneB, Recompute::None, 1);
  add(1, 1, 2, ScheduleKind::OneFOneB, Recompute::Full, 3);
  // Sequence parallelism: RMSNorm on n/t rows, all-gather / reduce-scatter, n/t rows between stages.
  add(2, 1, 1, ScheduleKind::OneFOneB, Recompute::None, 0, true);
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::Full, 0, true);
  add(2, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, 0, true);
  add(4, 1, 2, ScheduleKind::GPipe, Recompute::Selective, 1, true);
  // --recompute-activation: SwiGLU's output rebuilt in backward, alone and with selective.
  add(2, 2, 1, ScheduleKind::OneFOneB, Recompute::None, 0, true);
  out.back().recompute_act = true;
  add(1, 2, 2, ScheduleKind::Interleaved, Recompute::Selective, 1);
  out.back().recompute_act = true;
  return out;
}

class Llama : public ::testing::TestWithParam<Layout> {};

TEST_P(Llama, MatchesOneRankOnTheSameGlobalBatch) {
  testing::expect_same_training(
      reference(), testing::train_parallel(llama8(), testing::equivalence_train_config(1), GetParam(), 3, 33));
}

std::string llama_layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Grid, Llama, ::testing::ValuesIn(layouts()), llama_layout_name);

}  // namespace
}  // namespace ptdp
