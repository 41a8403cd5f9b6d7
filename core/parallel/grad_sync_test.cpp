// The data-parallel gradient reduction in bf16 (--grad-reduce-in-bf16) on CPU ranks against a sum
// done by hand: each rank's f32 gradient rounded to bf16, the d values added in f32 in rank order,
// the sum rounded to bf16 once (the local communicator's bf16 sum), widened back into the buffer.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "core/comm/local/local_comm.h"
#include "core/parallel/grad_sync.h"

namespace ptdp {
namespace {

float rank_grad_value(int rank, int64_t i) {
  return float(std::sin(0.37 * double(i) + 1.1 * rank)) * float(1 + i % 7) * 1e-3f + float(rank) * 1e-7f;
}
float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

TEST(GradSync, Bf16ReductionRoundsEachRankThenTheSumInRankOrder) {
  const int d = 3;
  const int64_t n = 1000;
  std::vector<float> expect_bf16_sum(static_cast<size_t>(n)), expect_f32_sum(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float acc = round_to_bf16(rank_grad_value(0, i)), exact = rank_grad_value(0, i);
    for (int r = 1; r < d; ++r) {
      acc += round_to_bf16(rank_grad_value(r, i));
      exact += rank_grad_value(r, i);
    }
    expect_bf16_sum[size_t(i)] = round_to_bf16(acc);
    expect_f32_sum[size_t(i)] = exact;
  }
  for (bool sharded : {false, true})
    for (bool bf16 : {true, false}) {
      std::atomic<int64_t> checked{0}, wrong{0}, unlike_f32{0};
      run_local_ranks(d, [&](int r, Communicator& comm) {
        auto be = make_cpu_backend();
        Tensor g = Tensor::empty({n}, DType::F32);
        for (int64_t i = 0; i < n; ++i) g.data<float>()[i] = rank_grad_value(r, i);
        GradSync sync(*be, g, &comm, /*bucket_elems=*/256, /*overlap=*/true, sharded, bf16);
        sync.begin();
        sync.ready_from(512);  // two buckets during the backward pass, the rest at the end
        sync.finish();
        for (const FlatRange& o : sync.owned())
          for (int64_t i = o.begin; i < o.end; ++i) {
            const float got = g.data<float>()[i];
            ++checked;
            wrong += got != (bf16 ? expect_bf16_sum[size_t(i)] : expect_f32_sum[size_t(i)]);
            unlike_f32 += got != expect_f32_sum[size_t(i)];
          }
      });
      const std::string what = std::string(sharded ? "reduce-scatter" : "all-reduce") + (bf16 ? " in bf16" : " in f32");
      EXPECT_EQ(checked.load(), sharded ? n : d * n) << what;
      EXPECT_EQ(wrong.load(), 0) << what;
      if (bf16) {
        EXPECT_GT(unlike_f32.load(), checked.load() / 2) << what << ": the bf16 sum is another sum";
      }
    }
}

// With one data-parallel rank nothing is reduced: the gradients stay f32, as without the flag.
TEST(GradSync, Bf16ReductionLeavesASingleRanksGradientsAlone) {
  run_local_ranks(1, [&](int, Communicator& comm) {
    auto be = make_cpu_backend();
    Tensor g = Tensor::empty({300}, DType::F32);
    for (int64_t i = 0; i < 300; ++i) g.data<float>()[i] = rank_grad_value(0, i);
    GradSync sync(*be, g, &comm, 128, false, false, true);
    sync.begin();
    sync.finish();
    int64_t changed = 0;
    for (int64_t i = 0; i < 300; ++i) changed += g.data<float>()[i] != rank_grad_value(0, i);
    EXPECT_EQ(changed, 0);
  });
}

}  // namespace
}  // namespace ptdp
