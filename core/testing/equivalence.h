// The strict-semantics check of the equivalence tests (gtest): every iteration's loss and the
// evaluation loss after training within 1e-5 (relative) of the reference, the final weights
// within 1e-5 over the whole model and 1e-3 per tensor (docs/TRAINING.md says why per tensor
// is looser).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/testing/parallel_run.h"

namespace ptdp::testing {

inline void expect_same_training(const RunResult& ref, const RunResult& got, const std::string& what = "") {
  ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_LT(std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i], 1e-5) << what << " iteration " << i + 1;
  EXPECT_LT(std::abs(got.eval_loss - ref.eval_loss) / ref.eval_loss, 1e-5) << what << " evaluation";
  const WeightDiff d = compare_weights(ref, got);
  EXPECT_LT(d.whole, 1e-5) << what;
  EXPECT_LT(d.worst_tensor, 1e-3) << what << ": " << d.worst_name;
}

}  // namespace ptdp::testing
